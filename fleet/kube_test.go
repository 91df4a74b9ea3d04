package fleet

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/headroom-dev/headroom/config"
)

// fakeKube is the part of a Kubernetes API server that pod discovery uses:
// list and watch pods in a namespace, with the streaming initial list that
// client-go asks for first (sendInitialEvents) and the plain list it falls
// back to.
type fakeKube struct {
	t        *testing.T
	mu       sync.Mutex
	rv       int
	pods     map[string]corev1.Pod
	watchers map[chan watchEvent]bool
}

type watchEvent struct {
	Type   string      `json:"type"`
	Object *corev1.Pod `json:"object"`
}

func newFakeKube(t *testing.T) (*fakeKube, *httptest.Server) {
	k := &fakeKube{t: t, pods: map[string]corev1.Pod{}, watchers: map[chan watchEvent]bool{}}
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	return k, srv
}

func (k *fakeKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/namespaces/llm/pods" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	if q.Get("watch") != "true" && q.Get("watch") != "1" {
		k.mu.Lock()
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(k.rv)}}
		for _, p := range k.pods {
			list.Items = append(list.Items, p)
		}
		k.mu.Unlock()
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	events := make(chan watchEvent, 64)
	k.mu.Lock()
	var initial []watchEvent
	if q.Get("sendInitialEvents") == "true" {
		for _, p := range k.pods {
			initial = append(initial, watchEvent{"ADDED", &p})
		}
		end := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.Itoa(k.rv), Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		initial = append(initial, watchEvent{"BOOKMARK", end})
	}
	k.watchers[events] = true
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		delete(k.watchers, events)
		k.mu.Unlock()
	}()
	enc := json.NewEncoder(w)
	flusher := w.(http.Flusher)
	for _, e := range initial {
		_ = enc.Encode(e)
	}
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-events:
			if enc.Encode(e) != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// set adds or replaces a pod serving on ip:port; delete removes it.
func (k *fakeKube) set(name, ip string, port int, labels map[string]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	typ := "MODIFIED"
	if _, ok := k.pods[name]; !ok {
		typ = "ADDED"
	}
	k.rv++
	p := corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm", UID: types.UID("uid-" + name), Labels: labels, ResourceVersion: strconv.Itoa(k.rv)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port), Protocol: "TCP"}}}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	k.pods[name] = p
	k.send(watchEvent{typ, &p})
}

func (k *fakeKube) delete(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.pods[name]
	if !ok {
		return
	}
	delete(k.pods, name)
	k.rv++
	p.ResourceVersion = strconv.Itoa(k.rv)
	k.send(watchEvent{"DELETED", &p})
}

func (k *fakeKube) send(e watchEvent) {
	for w := range k.watchers {
		select {
		case w <- e:
		default:
			k.t.Errorf("fake API: a watcher fell behind")
		}
	}
}

// Pods that Kubernetes discovery finds follow as targets: relabeling
// keeps the vLLM pods and names them, and a deployment that scales up and
// loses its first pod changes the targets with it.
func TestKubernetesSDTargetsFollowPods(t *testing.T) {
	kube, api := newFakeKube(t)
	vllm := map[string]string{"app": "vllm", "app.kubernetes.io/instance": "llama-70b"}
	kube.set("vllm-0", "10.0.0.5", 8000, vllm)
	kube.set("redis-0", "10.0.0.6", 6379, map[string]string{"app": "redis"})

	file := filepath.Join(t.TempDir(), "headroom.yml")
	cfg := fmt.Sprintf(`discovery:
  - kubernetes_sd_configs: [{role: pod, api_server: %s, namespaces: {names: [llm]}}]
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_label_app], regex: vllm, action: keep}
      - {source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_name], separator: /, target_label: target}
      - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_instance], target_label: pool}
    target: {engine: vllm}
`, api.URL)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	fw := follow(t, file)
	fw.until("pod vllm-0 as a target", func(ts map[string]config.Target) bool {
		return len(ts) == 1 && ts["llm/vllm-0"].Pool == "llama-70b" && ts["llm/vllm-0"].URL == "http://10.0.0.5:8000"
	})
	if got := fw.count("discovery[0]", Dropped); got != 1 {
		t.Errorf("dropped = %v, want 1 (redis)", got)
	}

	// The deployment scales up, then its first pod goes.
	kube.set("vllm-1", "10.0.0.7", 8000, vllm)
	fw.until("pod vllm-1 as a target", func(ts map[string]config.Target) bool { return len(ts) == 2 })
	kube.delete("vllm-0")
	fw.until("pod vllm-0 gone", func(ts map[string]config.Target) bool {
		_, has := ts["llm/vllm-0"]
		return !has && ts["llm/vllm-1"].URL == "http://10.0.0.7:8000"
	})
	if strings.Contains(fw.logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", fw.logs)
	}
}
