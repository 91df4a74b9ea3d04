package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// discoveryConfig is a config whose only targets come from one discovery
// entry, probed with one short scenario at the shipped interval.
func discoveryConfig(entry string) string {
	return "discovery:\n" + entry + `scenarios:
  - {name: short, input_tokens: 512, output_tokens: 16}
use_cases:
  - {name: chat, scenario: short, ttft_max: 1s}
`
}

// targetInfo lists the targets on a daemon's page with their pool and URL.
func targetInfo(t *testing.T, base string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k := range scrape(t, base) {
		if !strings.HasPrefix(k, "headroom_target_info{") {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(k, "headroom_target_info{"), "}"), ",") {
			name, value, _ := strings.Cut(kv, "=")
			labels[name] = value
		}
		out[labels["target"]] = labels["pool"] + " " + labels["url"]
	}
	return out
}

// seriesOf counts the series on a daemon's page that name a target.
func seriesOf(t *testing.T, base, target string) int {
	n := 0
	for k := range scrape(t, base) {
		if strings.Contains(k, "target="+target+",") || strings.Contains(k, "target="+target+"}") {
			n++
		}
	}
	return n
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, as a deployment tool does: the daemon
	// never reads half a file.
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

func TestFileSDTargetsFollow(t *testing.T) {
	sim := startTinySim(t, 20)
	addr := strings.TrimPrefix(sim.URL, "http://")
	dir := t.TempDir()
	list := filepath.Join(dir, "targets.json")
	writeJSON(t, list, []sdGroup{
		{Targets: []string{addr}, Labels: map[string]string{"name": "a", "pool": "p1"}},
		{Targets: []string{addr}, Labels: map[string]string{"name": "b", "pool": "p1"}},
	})
	cfgFile := filepath.Join(dir, "headroom.yml")
	// Relative to the config file, as Prometheus reads it; the file's
	// default refresh_interval (5m) only backs up its file watch.
	entry := `  - file_sd_configs: [{files: [targets.json]}]
    relabel_configs:
      - {source_labels: [name], target_label: target}
    target: {engine: vllm}
`
	if err := os.WriteFile(cfgFile, []byte(discoveryConfig(entry)), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs := startDaemon(t, cfgFile)
	waitFor(t, "targets a and b", func() bool {
		ti := targetInfo(t, base)
		return ti["a"] == "p1 "+sim.URL && ti["b"] == "p1 "+sim.URL
	})
	waitFor(t, "a probe of a", func() bool {
		return scrape(t, base)[`headroom_probes_total{result=success,scenario=short,target=a}`] >= 1
	})

	// a leaves, b moves pool, c joins.
	writeJSON(t, list, []sdGroup{
		{Targets: []string{addr}, Labels: map[string]string{"name": "b", "pool": "p2"}},
		{Targets: []string{addr}, Labels: map[string]string{"name": "c", "pool": "p2"}},
	})
	waitFor(t, "a gone, b in p2, c probed", func() bool {
		ti := targetInfo(t, base)
		_, hasA := ti["a"]
		return !hasA && ti["b"] == "p2 "+sim.URL && scrape(t, base)[`headroom_probes_total{result=success,scenario=short,target=c}`] >= 1
	})
	if n := seriesOf(t, base, "a"); n != 0 {
		t.Errorf("%d series of target a after it left, want none", n)
	}
	if !strings.Contains(logs.String(), `msg="targets changed" added=1 removed=1 probed=2`) {
		t.Errorf("no log line says a left and c came:\n%s", logs)
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "b (pool p2): "+sim.URL) || strings.Contains(string(page), "debug/pprof") {
		t.Errorf("the landing page does not list b in its pool, or links a profiler it does not serve:\n%s", page)
	}
	if got := scrape(t, base)[`headroom_targets{source=discovery[0],state=probed}`]; got != 2 {
		t.Errorf("headroom_targets probed = %v, want 2", got)
	}
	// A target relabeling cannot make valid is counted and logged, not probed.
	writeJSON(t, list, []sdGroup{{Targets: []string{addr}, Labels: map[string]string{"name": "b c"}}})
	waitFor(t, "the invalid target counted", func() bool {
		return scrape(t, base)[`headroom_targets{source=discovery[0],state=invalid}`] == 1
	})
	if !strings.Contains(logs.String(), `target \"b c\".name: must match`) {
		t.Errorf("no log line names the invalid target:\n%s", logs)
	}
	if len(targetInfo(t, base)) != 0 {
		t.Errorf("targets left: %v", targetInfo(t, base))
	}
}

func TestHTTPSDTargetsFollow(t *testing.T) {
	sim := startTinySim(t, 20)
	addr := strings.TrimPrefix(sim.URL, "http://")
	var mu sync.Mutex
	groups := []sdGroup{{Targets: []string{addr}, Labels: map[string]string{"__meta_pool": "llama"}}}
	sd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(groups)
	}))
	defer sd.Close()
	cfgFile := filepath.Join(t.TempDir(), "headroom.yml")
	// http_sd polls: a test cannot wait out its 1m default. The template
	// probes one of two scenarios.
	entry := fmt.Sprintf(`  - http_sd_configs: [{url: %s/targets, refresh_interval: 5s}]
    relabel_configs:
      - {source_labels: [__meta_pool], target_label: pool}
    target: {scenarios: [short]}
`, sd.URL)
	cfg := strings.Replace(discoveryConfig(entry), "use_cases:\n", "  - {name: long, input_tokens: 2048, output_tokens: 16}\nuse_cases:\n  - {name: doc, scenario: long, ttft_max: 1s}\n", 1)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startDaemon(t, cfgFile)
	waitFor(t, "the discovered target", func() bool { return targetInfo(t, base)[addr] == "llama "+sim.URL })
	waitFor(t, "its capacity series", func() bool {
		_, ok := scrape(t, base)[fmt.Sprintf("headroom_capacity_samples{target=%s,use_case=chat}", addr)]
		return ok
	})
	for k := range scrape(t, base) {
		if strings.Contains(k, "target=") && (strings.Contains(k, "scenario=long") || strings.Contains(k, "use_case=doc")) {
			t.Errorf("%s: the target is not probed with scenario long", k)
		}
	}
	mu.Lock()
	groups = nil
	mu.Unlock()
	waitFor(t, "the target gone", func() bool { return len(targetInfo(t, base)) == 0 })
}
