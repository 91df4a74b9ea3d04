package fleet

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/config"
)

// follower runs a fleet's discovery and reads its targets as discovery
// changes them: the daemon's apply loop, without the daemon.
type follower struct {
	t    *testing.T
	f    *Fleet
	reg  *prometheus.Registry
	base *config.Config
	logs *lockedBuffer
}

// follow starts discovery of the configuration file until the test ends.
func follow(t *testing.T, file string) *follower {
	t.Helper()
	base, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	fw := &follower{t: t, reg: prometheus.NewRegistry(), base: base, logs: &lockedBuffer{}}
	if fw.f, err = New(slog.New(slog.NewTextHandler(fw.logs, nil)), fw.reg, Shard{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run, err := fw.f.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(run)
	t.Cleanup(func() { cancel(); wg.Wait() })
	if err := fw.f.Discover(base); err != nil {
		t.Fatal(err)
	}
	return fw
}

// until applies discovery's updates as they come until the targets
// satisfy cond, and returns them. Discovery's manager sends its changes
// every 5 s; a minute bounds the wait for a broken build.
func (fw *follower) until(what string, cond func(map[string]config.Target) bool) map[string]config.Target {
	fw.t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case groups := <-fw.f.Updates():
			fw.f.Update(groups)
			targets := map[string]config.Target{}
			for _, tg := range fw.f.Config(fw.base).Targets {
				targets[tg.Name] = tg
			}
			if cond(targets) {
				return targets
			}
		case <-timeout:
			fw.t.Fatalf("no %s within a minute; log:\n%s", what, fw.logs)
		}
	}
}

// count is headroom_targets of a source and state.
func (fw *follower) count(source, state string) float64 { return value(fw.f, source, state) }

type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, as a deployment tool does: discovery
	// never reads half a file.
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// file_sd's targets follow its file, read relative to the configuration
// file as Prometheus reads it: they come, leave and move pool, and one that
// relabeling cannot make valid is counted and logged. (The daemon's
// TestHTTPSDTargetsFollow shows the same for the probes and series.)
func TestFileSDTargetsFollow(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "targets.json")
	writeJSON(t, list, []sdGroup{
		{Targets: []string{"h:8000"}, Labels: map[string]string{"name": "a", "pool": "p1"}},
		{Targets: []string{"h:8000"}, Labels: map[string]string{"name": "b", "pool": "p1"}},
	})
	file := filepath.Join(dir, "headroom.yml")
	// The file's default refresh_interval (5m) only backs up its file watch.
	cfg := `discovery:
  - file_sd_configs: [{files: [targets.json]}]
    relabel_configs:
      - {source_labels: [name], target_label: target}
    target: {engine: vllm}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	fw := follow(t, file)
	fw.until("targets a and b in p1", func(ts map[string]config.Target) bool {
		return len(ts) == 2 && ts["a"].Pool == "p1" && ts["b"].Pool == "p1" && ts["a"].URL == "http://h:8000" && ts["a"].Engine == "vllm"
	})

	// a leaves, b moves pool, c joins.
	writeJSON(t, list, []sdGroup{
		{Targets: []string{"h:8000"}, Labels: map[string]string{"name": "b", "pool": "p2"}},
		{Targets: []string{"h:8000"}, Labels: map[string]string{"name": "c", "pool": "p2"}},
	})
	fw.until("a gone, b in p2, c", func(ts map[string]config.Target) bool {
		_, hasA := ts["a"]
		return !hasA && ts["b"].Pool == "p2" && ts["c"].Pool == "p2"
	})
	if got := fw.count("discovery[0]", Probed); got != 2 {
		t.Errorf("headroom_targets probed = %v, want 2", got)
	}

	// A target relabeling cannot make valid is counted and logged, not probed.
	writeJSON(t, list, []sdGroup{{Targets: []string{"h:8000"}, Labels: map[string]string{"name": "b c"}}})
	fw.until("no target", func(ts map[string]config.Target) bool { return len(ts) == 0 })
	if got := fw.count("discovery[0]", Invalid); got != 1 {
		t.Errorf("headroom_targets invalid = %v, want 1", got)
	}
	if !strings.Contains(fw.logs.String(), `target \"b c\".name: must match`) {
		t.Errorf("no log line names the invalid target:\n%s", fw.logs)
	}
}
