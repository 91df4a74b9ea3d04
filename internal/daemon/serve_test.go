package daemon_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/sim"
)

func TestServeProbesAndReloads(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", "sk-test-secret-123")
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		simURL := w.tinySim("sim", 20)
		cfgFile := writeConfig(t, "", testConfig(simURL, "short"))
		d := w.startDaemon(cfgFile)

		ttft := `headroom_probe_ttft_seconds{scenario=short,target=sim}`
		waitFor(t, "successful probe", 10*time.Second, func() bool { return d.scrape()[ttft] >= 1 })
		m := d.scrape()
		for _, k := range []string{
			`headroom_probes_total{result=success,scenario=short,target=sim}`,
			`headroom_probe_itl_seconds{scenario=short,target=sim}`,
			`headroom_probe_decode_tokens_per_second{scenario=short,target=sim}`,
			`headroom_probe_e2e_seconds{scenario=short,target=sim}`,
			`headroom_target_up{target=sim}`,
			`headroom_config_last_reload_successful{}`,
		} {
			if m[k] < 1 {
				t.Errorf("%s = %v, want >= 1", k, m[k])
			}
		}
		d.checkContract()
		if in := m[`headroom_probe_input_tokens{scenario=short,target=sim}`]; in < 512*0.99 || in > 512*1.01 {
			t.Errorf("input tokens %v, want 512 ± 1%%", in)
		}

		// A broken file is refused and the running configuration keeps probing.
		if err := os.WriteFile(cfgFile, []byte("targets:\n  - name: sim\n    url: nope\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, body := d.reload(); code != http.StatusInternalServerError || !strings.Contains(body, "targets[0].url: missing scheme") {
			t.Fatalf("reload of a broken file: %d %s", code, body)
		}
		before := d.scrape()
		if before[`headroom_config_last_reload_successful{}`] != 0 {
			t.Error("headroom_config_last_reload_successful should be 0 after a failed reload")
		}
		waitFor(t, "probe under the old config", 10*time.Second, func() bool { return d.scrape()[ttft] > before[ttft] })

		// A good file adds a scenario.
		if err := os.WriteFile(cfgFile, []byte(testConfig(simURL, "short", "other")), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, body := d.reload(); code != http.StatusOK {
			t.Fatalf("reload: %d %s", code, body)
		}
		waitFor(t, "probe of the new scenario", 10*time.Second, func() bool {
			return d.scrape()[`headroom_probe_ttft_seconds{scenario=other,target=sim}`] >= 1
		})
		// A file without the first scenario: its series go with it.
		if err := os.WriteFile(cfgFile, []byte(testConfig(simURL, "other")), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, body := d.reload(); code != http.StatusOK {
			t.Fatalf("reload: %d %s", code, body)
		}
		for k := range d.scrape() {
			if strings.Contains(k, "scenario=short") {
				t.Errorf("%s is exported after its scenario left", k)
			}
		}
		if strings.Contains(d.logs.String(), "sk-test-secret-123") {
			t.Error("the API key appears in the logs")
		}
		if strings.Contains(d.get("/metrics"), "sk-test-secret-123") {
			t.Error("the API key appears on /metrics")
		}
		for _, path := range []string{"/", "/-/healthy", "/-/ready", "/status", "/api/v1/status"} {
			d.get(path)
		}
	})
}

// A reload with another max_in_flight while probes run: every loop must
// stop and restart without hanging.
func TestReloadChangingInFlightCap(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", "sk-test")
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		simURL := w.tinySim("sim", 20)
		dir := t.TempDir()
		write := func(cap int) string {
			return writeConfig(t, dir, testConfig(simURL, "short")+fmt.Sprintf("max_in_flight: %d\ncalibration: {enabled: false}\n", cap))
		}
		d := w.startDaemon(write(1))
		ttft := `headroom_probe_ttft_seconds{scenario=short,target=sim}`
		for _, c := range []int{2, 1, 3} {
			before := d.scrape()[ttft]
			write(c)
			start := time.Now()
			if code, body := d.reload(); code != http.StatusOK {
				t.Fatalf("reload: %d %s", code, body)
			}
			// Virtual time: a reload that waited on a probe would take its seconds.
			if took := time.Since(start); took > time.Second {
				t.Errorf("reload to max_in_flight %d took %s", c, took)
			}
			waitFor(t, "probe after the reload", 10*time.Second, func() bool { return d.scrape()[ttft] > before })
		}
	})
}

// TestServeReadsLoadAndPower points the daemon at the simulator carrying
// stepped background load and reading GPU power from its DCGM-shaped
// metrics. Without calibration: its decisions, a fit of the capacity
// model before each probe, were most of the test's time.
func TestServeReadsLoadAndPower(t *testing.T) {
	t.Parallel() // seconds to a minute each under -race: two at a time on two cores
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		s := sim.NewServer(sim.Tiny, 1, "vllm")
		w.wg.Go(func() { s.Run(w.ctx) })
		w.wg.Go(func() {
			s.RunLoad(w.ctx, sim.Steps{Levels: []int{0, 6}, Hold: 60}, []sim.Shape{{Context: 2048, Output: 2000, Weight: 1}}, 7)
		})
		url := w.serve("sim", s.Handler())
		cfg := fmt.Sprintf(`targets:
  - name: sim
    url: %s
power:
  source: dcgm
  dcgm_url: %s/metrics
engine_scrape_interval: 100ms
calibration: {enabled: false}
scenarios:
  - {name: s, input_tokens: 256, output_tokens: 8, interval: 1s}
use_cases:
  - {name: u, scenario: s, ttft_max: 1s}
`, url, url)
		d := w.startDaemon(writeConfig(t, "", cfg))
		running := `headroom_target_requests{state=running,target=sim}`
		rose := false
		// Each step holds a minute, and the users of a step arrive within
		// 30 s of it (sim's arrival spread): the load is high within 90 s,
		// low again within 120 s, and both have been seen within 130 s.
		// Read every 5 s: each scrape evaluates the capacity model again,
		// most of the test's time at 10 a second.
		waitEvery(t, "load rising and falling with the background steps", 130*time.Second, 5*time.Second, func() bool {
			v, ok := d.scrape()[running]
			rose = rose || ok && v >= 5
			return rose && ok && v <= 1
		})
		waitEvery(t, "GPU power and energy per token", 10*time.Second, 5*time.Second, func() bool {
			m := d.scrape()
			w := m[`headroom_gpu_power_watts{gpu=0,target=sim,uuid=GPU-5a1e0000-0000-4000-8000-000000000000}`]
			jpt, ok := m[`headroom_energy_joules_per_token{target=sim}`]
			return w >= sim.Tiny.Params.IdleWatts && ok && jpt > 0
		})
	})
}
