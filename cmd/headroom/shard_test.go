package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/sim"
)

// startFleet serves 110 simulated servers, s0 to s109, on one loopback port.
func startFleet(t *testing.T) (*sim.Fleet, *httptest.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := sim.NewFleet(ctx, sim.Tiny, 20, "vllm", 110)
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); cancel(); f.Wait() })
	return f, srv
}

// fleetList is a file_sd list of the fleet's first n servers.
func fleetList(srv *httptest.Server, n int) []sdGroup {
	addr := strings.TrimPrefix(srv.URL, "http://")
	var gs []sdGroup
	for i := range n {
		gs = append(gs, sdGroup{Targets: []string{addr}, Labels: map[string]string{"target": fmt.Sprintf("s%d", i), "__url__": fmt.Sprintf("%s/s%d", srv.URL, i)}})
	}
	return gs
}

func TestTwoShardsProbeEveryTargetOnce(t *testing.T) {
	fl, srv := startFleet(t)
	dir := t.TempDir()
	list := filepath.Join(dir, "targets.json")
	writeJSON(t, list, fleetList(srv, 100))
	cfgFile := filepath.Join(dir, "headroom.yml")
	entry := `  - file_sd_configs: [{files: [targets.json]}]
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
		name := fmt.Sprintf("s%d", i)
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
			name := fmt.Sprintf("s%d", i)
			a, b := counted(pages[0], name), counted(pages[1], name)
			if got := fl.Requests(name); got == 0 || float64(got) != a+b || (a > 0 && b > 0) {
				return false
			}
		}
		return true
	})

	// Ten targets join: none of the hundred changes replica.
	writeJSON(t, list, fleetList(srv, 110))
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
