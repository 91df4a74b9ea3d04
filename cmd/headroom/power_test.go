package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-dev/headroom/sim"
)

// TestServeReadsLoadAndPower points serve at the simulator carrying stepped
// background load and reading GPU power from its DCGM-shaped metrics.
func TestServeReadsLoadAndPower(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ten times faster than the wall: the background's users join over
	// the simulator's 30 s arrival spread, so each level holds 40 s of
	// its time (4 s of the wall) for them to arrive and run.
	s := sim.NewServer(sim.Tiny, 10, "vllm")
	go s.Run(ctx)
	go s.RunLoad(ctx, sim.Steps{Levels: []int{0, 6}, Hold: 40}, []sim.Shape{{Context: 2048, Output: 2000, Weight: 1}}, 7)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	cfg := fmt.Sprintf(`targets:
  - name: sim
    url: %s
power:
  source: dcgm
  dcgm_url: %s/metrics
engine_scrape_interval: 100ms
scenarios:
  - {name: s, input_tokens: 256, output_tokens: 8, interval: 1s}
use_cases:
  - {name: u, scenario: s, ttft_max: 1s}
`, srv.URL, srv.URL)
	cfgFile := filepath.Join(t.TempDir(), "headroom.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startDaemon(t, cfgFile)
	running := `headroom_target_requests{state=running,target=sim}`
	lo, hi := 1e9, -1.0
	waitFor(t, "load to rise and fall with the background steps", func() bool {
		v, ok := scrape(t, base)[running]
		if ok {
			lo, hi = min(lo, v), max(hi, v)
		}
		return lo <= 1 && hi >= 5
	})
	waitFor(t, "GPU power and energy per token", func() bool {
		m := scrape(t, base)
		w := m[`headroom_gpu_power_watts{gpu=0,target=sim,uuid=GPU-5a1e0000-0000-4000-8000-000000000000}`]
		jpt, ok := m[`headroom_energy_joules_per_token{target=sim}`]
		return w >= sim.Tiny.Params.IdleWatts && ok && jpt > 0
	})
}
