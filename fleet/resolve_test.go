package fleet

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/headroom-dev/headroom/config"
)

// entry parses one discovery entry as the config file would hold it.
func entry(t *testing.T, yaml string) config.Discovery {
	t.Helper()
	c, err := config.Parse([]byte("discovery:\n  - file_sd_configs: [{files: [t.json]}]\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c.Discovery[0]
}

func TestResolve(t *testing.T) {
	pod := &targetgroup.Group{Source: "pod/llm/vllm-0", Labels: model.LabelSet{"__meta_kubernetes_namespace": "llm"},
		Targets: []model.LabelSet{{"__address__": "10.0.0.7:8000", "__meta_kubernetes_pod_name": "vllm-0",
			"__meta_kubernetes_pod_label_app_kubernetes_io_instance": "llama-70b", "__meta_kubernetes_pod_container_port_name": "http"}}}
	tests := []struct {
		name, yaml string
		group      *targetgroup.Group
		want       config.Target // the fields compared: name, URLs, pool, model, engine, api
		dropped    bool
		err        string
	}{
		{name: "defaults from the address", yaml: "    target: {engine: vllm, model: llama, pool: p}\n", group: pod,
			want: config.Target{Name: "10.0.0.7:8000", URL: "http://10.0.0.7:8000", MetricsURL: "http://10.0.0.7:8000/metrics", Pool: "p", Model: "llama", Engine: "vllm", API: "chat"}},
		{name: "relabeled name, pool and URLs", group: pod, yaml: `    relabel_configs:
      - {source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_name], separator: /, target_label: target}
      - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_instance], target_label: pool}
      - {source_labels: [__address__], target_label: __url__, replacement: https://$1/serve}
      - {source_labels: [__address__], regex: '(.+):8000', target_label: __metrics_url__, replacement: http://$1:9090/metrics}
    target: {engine: sglang, api: completions}
`, want: config.Target{Name: "llm/vllm-0", URL: "https://10.0.0.7:8000/serve", MetricsURL: "http://10.0.0.7:9090/metrics", Pool: "llama-70b", Engine: "sglang", API: "completions"}},
		{name: "a group's labels, then its target's", yaml: "",
			group: &targetgroup.Group{Source: "f", Labels: model.LabelSet{"pool": "a", "model": "m", "__scheme__": "https"}, Targets: []model.LabelSet{{"__address__": "h:1", "pool": "b"}}},
			want:  config.Target{Name: "h:1", URL: "https://h:1", MetricsURL: "https://h:1/metrics", Pool: "b", Model: "m", Engine: "auto", API: "chat"}},
		{name: "trtllm's metrics path", yaml: "    target: {engine: trtllm}\n", group: pod,
			want: config.Target{Name: "10.0.0.7:8000", URL: "http://10.0.0.7:8000", MetricsURL: "http://10.0.0.7:8000/prometheus/metrics", Engine: "trtllm", API: "chat"}},
		{name: "dropped by relabeling", yaml: "    relabel_configs: [{source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}]\n", group: pod, dropped: true},
		{name: "no address", yaml: "", group: &targetgroup.Group{Source: "f", Targets: []model.LabelSet{{"pool": "a"}}},
			err: `target "".name: must match [a-zA-Z0-9_.:/-]+, got ""`},
		{name: "a name that is no label value", yaml: "    relabel_configs: [{target_label: target, replacement: 'a b'}]\n", group: pod,
			err: `target "a b".name: must match`},
		{name: "credentials in the URL", group: pod, yaml: "    relabel_configs: [{target_label: __url__, replacement: 'http://u:hunter2@h'}]\n",
			err: `url: credentials in the URL would leak`},
		// Issue 37: a label of 100,000 bytes rode on every series; a
		// __url__ at the daemon's own reload turned probes into reloads.
		{name: "a name too long for a label", yaml: "", group: &targetgroup.Group{Source: "f", Targets: []model.LabelSet{{"__address__": "h:1",
			"target": model.LabelValue(strings.Repeat("x", 100_000))}}},
			err: `.name: a label value of at most 1024 bytes of UTF-8 is needed, got 100000 bytes`},
		{name: "a model too long for a label", yaml: "", group: &targetgroup.Group{Source: "f", Targets: []model.LabelSet{{"__address__": "h:1",
			"model": model.LabelValue(strings.Repeat("m", 5000))}}},
			err: `target "h:1".model: a label value of at most 1024 bytes`},
		{name: "a URL with a query", group: pod, yaml: "    relabel_configs: [{target_label: __url__, replacement: 'http://127.0.0.1:9835/-/reload?'}]\n",
			err: `url: a base URL takes no query or fragment`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := slices.Collect(Resolve(entry(t, tc.yaml), []*targetgroup.Group{tc.group}))
			if len(rs) != 1 {
				t.Fatalf("%d results, want 1", len(rs))
			}
			r := rs[0]
			if r.Group != tc.group.Source {
				t.Errorf("group %q, want %q", r.Group, tc.group.Source)
			}
			switch {
			case tc.dropped:
				if !r.Dropped {
					t.Errorf("kept %+v, want it dropped", r.Target)
				}
			case tc.err != "":
				if r.Err == nil || !strings.Contains(r.Err.Error(), tc.err) {
					t.Errorf("error %v, want one containing %q", r.Err, tc.err)
				}
				if r.Err != nil && strings.Contains(r.Err.Error(), "hunter2") {
					t.Errorf("error carries the URL's password: %v", r.Err)
				}
				if r.Err != nil && len(r.Err.Error()) > 512 {
					t.Errorf("error of %d bytes: a long label is not repeated into the log", len(r.Err.Error()))
				}
			default:
				g := r.Target
				got := config.Target{Name: g.Name, URL: g.URL, MetricsURL: g.MetricsURL, Pool: g.Pool, Model: g.Model, Engine: g.Engine, API: g.API}
				if r.Err != nil || r.Dropped || !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %+v (err %v, dropped %v)\nwant %+v", got, r.Err, r.Dropped, tc.want)
				}
			}
		})
	}
}
