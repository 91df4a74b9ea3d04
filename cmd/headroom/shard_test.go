package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/sim"
)

// fleetServer is many servers on one loopback port: /t17/... is target 17,
// a simulator of its own. It counts the probes each target receives.
type fleetServer struct {
	*httptest.Server
	ctx    context.Context
	mu     sync.Mutex
	sims   map[string]http.Handler
	probes map[string]int
}

func startFleet(t *testing.T) *fleetServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleetServer{ctx: ctx, sims: map[string]http.Handler{}, probes: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		f.server(name, strings.HasSuffix(rest, "completions")).ServeHTTP(w, r2)
	}))
	t.Cleanup(func() { f.Close(); cancel() })
	return f
}

// server is the named target's simulator, started on first use.
func (f *fleetServer) server(name string, probe bool) http.Handler {
	f.mu.Lock()
	defer f.mu.Unlock()
	if probe {
		f.probes[name]++
	}
	h, ok := f.sims[name]
	if !ok {
		s := sim.NewServer(sim.Tiny, 20, "vllm")
		go s.Run(f.ctx)
		h = s.Handler()
		f.sims[name] = h
	}
	return h
}

func (f *fleetServer) probed(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes[name]
}

// list is a file_sd list of n targets t0..t(n-1) on the fleet server.
func (f *fleetServer) list(n int) []sdGroup {
	addr := strings.TrimPrefix(f.URL, "http://")
	var gs []sdGroup
	for i := range n {
		gs = append(gs, sdGroup{Targets: []string{addr}, Labels: map[string]string{"name": fmt.Sprintf("t%d", i)}})
	}
	return gs
}

func TestTwoShardsProbeEveryTargetOnce(t *testing.T) {
	srv := startFleet(t)
	dir := t.TempDir()
	list := filepath.Join(dir, "targets.json")
	writeJSON(t, list, srv.list(100))
	cfgFile := filepath.Join(dir, "headroom.yml")
	entry := `  - file_sd_configs: [{files: [targets.json]}]
    relabel_configs:
      - {source_labels: [name], target_label: target}
      - {source_labels: [__address__, name], separator: /, target_label: __url__, replacement: http://$1}
    target: {engine: vllm}
`
	// A hundred targets on one simulated engine are one server to it: their
	// calibration bursts would queue behind one another for minutes.
	if err := os.WriteFile(cfgFile, []byte(discoveryConfig(entry)+"calibration: {enabled: false}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var replicas [2]string
	for i := range replicas {
		replicas[i], _ = startShard(t, cfgFile, fleet.Shard{Index: i, Count: 2})
	}
	owned := func() [2]map[string]bool {
		var out [2]map[string]bool
		for i, base := range replicas {
			out[i] = map[string]bool{}
			for name := range targetInfo(t, base) {
				out[i][name] = true
			}
		}
		return out
	}
	waitFor(t, "100 targets split between the replicas", func() bool {
		o := owned()
		return len(o[0])+len(o[1]) == 100
	})
	before := owned()
	for i := range 100 {
		name := fmt.Sprintf("t%d", i)
		if before[0][name] == before[1][name] {
			t.Errorf("%s is probed by %d replicas", name, map[bool]int{true: 2, false: 0}[before[0][name]])
		}
	}
	for i, o := range before {
		// Binomial(100, 1/2): within 4 standard deviations.
		if len(o) < 30 || len(o) > 70 {
			t.Errorf("replica %d probes %d of 100 targets, want about half", i, len(o))
		}
		if got := scrape(t, replicas[i])[`headroom_targets{source=discovery[0],state=other_shard}`]; int(got) != 100-len(o) {
			t.Errorf("replica %d: other_shard = %v, want %d", i, got, 100-len(o))
		}
	}
	// Every target gets its first probe, from its one replica: the probes
	// the server saw are the probes that replica counted.
	counted := func(page map[string]float64, name string) (n float64) {
		for _, result := range []string{"success", "timeout", "http_error", "stream_error", "connect_error"} {
			n += page[fmt.Sprintf("headroom_probes_total{result=%s,scenario=short,target=%s}", result, name)]
		}
		return n
	}
	waitFor(t, "every target probed once, by one replica", func() bool {
		pages := [2]map[string]float64{scrape(t, replicas[0]), scrape(t, replicas[1])}
		for i := range 100 {
			name := fmt.Sprintf("t%d", i)
			a, b := counted(pages[0], name), counted(pages[1], name)
			if got := srv.probed(name); got == 0 || float64(got) != a+b || (a > 0 && b > 0) {
				return false
			}
		}
		return true
	})

	// Ten targets join: none of the hundred changes replica.
	writeJSON(t, list, srv.list(110))
	waitFor(t, "110 targets split", func() bool {
		o := owned()
		return len(o[0])+len(o[1]) == 110
	})
	after := owned()
	for i := range 2 {
		for name := range before[i] {
			if !after[i][name] {
				t.Errorf("%s moved off replica %d when 10 targets joined", name, i)
			}
		}
	}
}
