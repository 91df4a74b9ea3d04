package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/deploy/copies"
)

// TestCopiesMatchSources fails when a rules or dashboard copy in deploy/ has
// drifted from alerts/ or dashboards/: run `go generate ./deploy`.
func TestCopiesMatchSources(t *testing.T) {
	want, err := copies.Expected("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range want {
		got, err := os.ReadFile(f.Path)
		if err != nil {
			t.Errorf("%s: %v (run go generate ./deploy)", f.Path, err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s differs from its source: run go generate ./deploy", f.Path)
		}
	}
}

// tool runs a tool pinned in deploy/tools/go.mod (kustomize, helm): the Go
// toolchain fetches and builds the exact version, nothing else to install.
func tool(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"-C", "tools", "tool"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestKustomizeBuild(t *testing.T) {
	checkObjects(t, tool(t, "kustomize", "build", "../kubernetes/base"))
	out := tool(t, "kustomize", "build", "../kubernetes/overlays/vllm-discovery")
	objs := checkObjects(t, out)
	if objs["Role"] != 1 || objs["RoleBinding"] != 1 {
		t.Errorf("overlay rendered %v, want a Role and a RoleBinding", objs)
	}
	for _, want := range []string{"replicas: 2", "namespace: inference", "kubernetes_sd_configs"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("overlay lacks %q", want)
		}
	}
}

func TestHelmChart(t *testing.T) {
	tool(t, "helm", "lint", "--strict", "../helm/headroom")
	t.Run("defaults", func(t *testing.T) {
		out := tool(t, "helm", "template", "hr", "../helm/headroom", "--namespace", "monitoring")
		objs := checkObjects(t, out)
		// No discovery configured: no token and no access to the API.
		if objs["Role"]+objs["ClusterRole"] != 0 || !bytes.Contains(out, []byte("automountServiceAccountToken: false")) {
			t.Errorf("a static configuration got API access: %v", objs)
		}
	})
	t.Run("discovery of vLLM pods", func(t *testing.T) {
		out := tool(t, "helm", "template", "hr", "../helm/headroom", "--namespace", "monitoring", "-f", "../helm/headroom/examples/vllm-discovery.yaml")
		objs := checkObjects(t, out)
		if objs["Role"] != 1 || objs["RoleBinding"] != 1 || objs["ClusterRole"] != 0 {
			t.Errorf("rendered %v, want one Role and RoleBinding (namespace inference) and no ClusterRole", objs)
		}
		for _, want := range []string{"replicas: 2", "--shard.count=2", "namespace: inference", "automountServiceAccountToken: true", "kubernetes_sd_configs"} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("rendered chart lacks %q", want)
			}
		}
	})
	t.Run("cluster-wide discovery", func(t *testing.T) {
		objs := checkObjects(t, tool(t, "helm", "template", "hr", "../helm/headroom", "-f", "../helm/headroom/examples/vllm-discovery.yaml", "--set", "rbac.clusterWide=true"))
		if objs["ClusterRole"] != 1 || objs["ClusterRoleBinding"] != 1 || objs["Role"] != 0 {
			t.Errorf("rendered %v, want a ClusterRole and its binding only", objs)
		}
	})
	t.Run("existing secret", func(t *testing.T) {
		out := tool(t, "helm", "template", "hr", "../helm/headroom", "--set", "apiKeys.existingSecret=keys")
		objs := checkObjects(t, out)
		if objs["Secret"] != 0 {
			t.Errorf("the chart made a Secret though apiKeys.existingSecret names one")
		}
		if !bytes.Contains(out, []byte("secretName: keys")) {
			t.Errorf("the pod does not mount the existing secret")
		}
	})
}

// checkObjects decodes every rendered object strictly into its Kubernetes
// type, so a misspelt field fails here rather than in a cluster, checks what
// the issue asks of a production deployment, and counts objects by kind.
func checkObjects(t *testing.T, rendered []byte) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	dec := yaml.NewDecoder(bytes.NewReader(rendered))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("rendered YAML: %v", err)
		}
		if doc == nil {
			continue
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		kind, _ := doc["kind"].(string)
		kinds[kind]++
		strict := func(v any) {
			if err := sigsyaml.UnmarshalStrict(b, v); err != nil {
				t.Errorf("%s: %v", kind, err)
			}
		}
		switch kind {
		case "StatefulSet":
			var d appsv1.StatefulSet
			strict(&d)
			checkPod(t, d.Spec.Template.Spec)
			checkShards(t, d)
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole // a Role's fields are a ClusterRole's, less aggregation
			strict(&r)
			checkDiscoveryRules(t, kind, r.Rules)
		case "RoleBinding", "ClusterRoleBinding":
			strict(&rbacv1.ClusterRoleBinding{})
		case "Service":
			strict(&corev1.Service{})
		case "ServiceAccount":
			strict(&corev1.ServiceAccount{})
		case "Secret":
			strict(&corev1.Secret{})
		case "ConfigMap":
			var cm corev1.ConfigMap
			strict(&cm)
			checkConfigMap(t, cm)
		case "ServiceMonitor":
			strict(&monitoringv1.ServiceMonitor{})
		case "PrometheusRule":
			var pr monitoringv1.PrometheusRule
			strict(&pr)
			checkRules(t, pr)
		default:
			t.Errorf("unexpected kind %q", kind)
		}
	}
	for _, k := range []string{"StatefulSet", "Service", "ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if kinds[k] == 0 {
			t.Errorf("no %s rendered", k)
		}
	}
	return kinds
}

// checkShards checks that every replica is a shard that knows the count
// and takes its index from its ordinal.
func checkShards(t *testing.T, s appsv1.StatefulSet) {
	t.Helper()
	args := strings.Join(s.Spec.Template.Spec.Containers[0].Args, " ")
	env := map[string]string{}
	for _, e := range s.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	count := fmt.Sprintf("--shard.count=%d", *s.Spec.Replicas)
	if !strings.Contains(args, count) && env["HEADROOM_SHARD_COUNT"] != fmt.Sprint(*s.Spec.Replicas) {
		t.Errorf("StatefulSet %s: %d replicas, but neither %s nor HEADROOM_SHARD_COUNT in %q / %v", s.Name, *s.Spec.Replicas, count, args, env)
	}
	if !strings.Contains(args, "--shard.index=ordinal") && env["HEADROOM_SHARD_INDEX"] != "ordinal" {
		t.Errorf("StatefulSet %s: the shard index is not the pod's ordinal", s.Name)
	}
}

// checkDiscoveryRules allows what Kubernetes discovery reads, read-only.
func checkDiscoveryRules(t *testing.T, kind string, rules []rbacv1.PolicyRule) {
	t.Helper()
	reads := map[string]bool{}
	for _, r := range rules {
		if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("%s grants %v, want get, list, watch only", kind, r.Verbs)
		}
		for _, res := range r.Resources {
			reads[res] = true
		}
	}
	for _, res := range []string{"pods", "endpointslices"} {
		if !reads[res] {
			t.Errorf("%s cannot read %s", kind, res)
		}
	}
}

func checkPod(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod does not require a non-root user")
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: root filesystem is writable", c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: privilege escalation allowed", c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s: no resource requests", c.Name)
		}
		for _, e := range c.Env {
			if strings.Contains(strings.ToLower(e.Name), "key") && e.Value != "" {
				t.Errorf("container %s: API key in the pod spec (%s)", c.Name, e.Name)
			}
		}
	}
}

// checkConfigMap validates the daemon's configuration with the daemon's own
// parser, and the dashboards' ConfigMap against the sources.
func checkConfigMap(t *testing.T, cm corev1.ConfigMap) {
	t.Helper()
	if cfg, ok := cm.Data["headroom.yml"]; ok {
		if _, err := config.Parse([]byte(cfg)); err != nil {
			t.Errorf("ConfigMap %s: headroom.yml: %v", cm.Name, err)
		}
	}
	if _, ok := cm.Data["capacity.json"]; !ok {
		return
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s: no grafana_dashboard label for Grafana's sidecar", cm.Name)
	}
	for _, name := range copies.Dashboards {
		src, err := os.ReadFile(filepath.Join("..", "dashboards", name))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[name] != string(src) {
			t.Errorf("ConfigMap %s: %s differs from dashboards/%s", cm.Name, name, name)
		}
	}
}

// checkRules compares the PrometheusRule's groups with alerts/.
func checkRules(t *testing.T, pr monitoringv1.PrometheusRule) {
	t.Helper()
	src, err := os.ReadFile("../alerts/headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := sigsyaml.UnmarshalStrict(src, &want); err != nil {
		t.Fatalf("alerts/headroom.rules.yml as a PrometheusRule spec: %v", err)
	}
	got, _ := sigsyaml.Marshal(pr.Spec)
	exp, _ := sigsyaml.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Errorf("PrometheusRule %s differs from alerts/headroom.rules.yml", pr.Name)
	}
}

// TestCompose loads the stack as docker compose would (compose-spec's own
// loader; no Docker engine here) and checks what it must wire together.
func TestCompose(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"compose/compose.yaml"}, cli.WithOsEnv, cli.WithWorkingDirectory("compose"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("load compose.yaml: %v", err)
	}
	for _, name := range []string{"headroom", "sim", "prometheus", "grafana"} {
		if _, err := p.GetService(name); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
	// Every bind mount names a file or directory of the repository.
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != "bind" {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("service %s mounts %s: %v", s.Name, v.Source, err)
			}
		}
	}
	cfg, err := os.ReadFile("compose/headroom.yml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(cfg); err != nil {
		t.Errorf("compose/headroom.yml: %v", err)
	}
}
