package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/internal/contract"
	"github.com/headroom-dev/headroom/internal/exposition"
	"github.com/headroom-dev/headroom/sim"
)

// startTinySim serves the fast test profile on loopback.
func startTinySim(t *testing.T, scale float64) *httptest.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := sim.NewServer(sim.Tiny, scale, "vllm")
	go s.Run(ctx)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); cancel() })
	return srv
}

// startDaemon runs the daemon on a config file and returns its base URL.
func startDaemon(t *testing.T, cfgFile string) (string, *syncWriter) {
	t.Helper()
	return startShard(t, cfgFile, fleet.Shard{})
}

// startShard runs one replica of a sharded daemon.
func startShard(t *testing.T, cfgFile string, shard fleet.Shard) (string, *syncWriter) {
	t.Helper()
	logs := &syncWriter{w: &bytes.Buffer{}}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := newDaemon(logger, shard, func() (*config.Config, error) { return config.Load(cfgFile) })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan int)
	go func() {
		done <- d.serve(ctx, &webFlags{listen: []string{"127.0.0.1:0"}, lifecycle: true}, func(a []net.Addr) { addr <- a[0] })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	})
	return "http://" + (<-addr).String(), logs
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// scrape returns the value of every sample, keyed by name{labels}.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// writeConfig writes a configuration file into dir (a new temporary one
// for "") and returns its path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	file := filepath.Join(dir, "headroom.yml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// waitFor polls cond until it holds. Its deadline bounds a wait, it times
// nothing: under -race on two busy cores the daemon's readings lag (a
// wall-clock wait that issue 38 asks to move to virtual time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testConfig(url string, scenarios ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "targets:\n  - name: sim\n    url: %s\n    api_key_env: HEADROOM_TEST_API_KEY\nprobe_budget: 0.5\nengine_scrape_interval: 100ms\nscenarios:\n", url)
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  - name: %s\n    input_tokens: 512\n    output_tokens: 16\n    interval: 1s\n", s)
	}
	b.WriteString("use_cases:\n  - name: chat\n    scenario: " + scenarios[0] + "\n    ttft_max: 1s\n")
	return b.String()
}

func TestServeProbesAndReloads(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", "sk-test-secret-123")
	simSrv := startTinySim(t, 20)
	cfgFile := filepath.Join(t.TempDir(), "headroom.yml")
	if err := os.WriteFile(cfgFile, []byte(testConfig(simSrv.URL, "short")), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs := startDaemon(t, cfgFile)

	ttft := `headroom_probe_ttft_seconds{scenario=short,target=sim}`
	waitFor(t, "a successful probe", func() bool { return scrape(t, base)[ttft] >= 1 })
	m := scrape(t, base)
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
	checkContract(t, base)
	if in := m[`headroom_probe_input_tokens{scenario=short,target=sim}`]; in < 512*0.99 || in > 512*1.01 {
		t.Errorf("input tokens %v, want 512 ± 1%%", in)
	}

	// A broken file is refused and the running configuration keeps probing.
	if err := os.WriteFile(cfgFile, []byte("targets:\n  - name: sim\n    url: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "targets[0].url: missing scheme") {
		t.Fatalf("reload of a broken file: %d %s", resp.StatusCode, body)
	}
	before := scrape(t, base)
	if before[`headroom_config_last_reload_successful{}`] != 0 {
		t.Error("headroom_config_last_reload_successful should be 0 after a failed reload")
	}
	waitFor(t, "probing to go on under the old config", func() bool { return scrape(t, base)[ttft] > before[ttft] })

	// A good file adds a scenario.
	if err := os.WriteFile(cfgFile, []byte(testConfig(simSrv.URL, "short", "other")), 0o600); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Post(base+"/-/reload", "", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("reload: %v %v", resp, err)
	}
	waitFor(t, "the new scenario", func() bool { return scrape(t, base)[`headroom_probe_ttft_seconds{scenario=other,target=sim}`] >= 1 })
	if strings.Contains(logs.String(), "sk-test-secret-123") {
		t.Error("the API key appears in the logs")
	}
	page, _ := http.Get(base + "/metrics")
	b, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if strings.Contains(string(b), "sk-test-secret-123") {
		t.Error("the API key appears on /metrics")
	}
	for _, path := range []string{"/", "/-/healthy", "/-/ready"} {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s: %v %v", path, resp, err)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("targets:\n  - name: a\n    url: http://h\n  - name: b\n    url: ftp://h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"check-config", bad}); code != 1 {
		t.Errorf("check-config on a bad file exited %d, want 1", code)
	}
	// A FIFO named as a seed is refused at once; opening it would block
	// check-config until some writer came.
	fifo := filepath.Join(dir, "seed.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	seeded := filepath.Join(dir, "seeded.yml")
	if err := os.WriteFile(seeded, []byte("targets:\n  - {name: a, url: 'http://h', capacity_seed: seed.json}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"check-config", seeded}); code != 1 {
		t.Errorf("check-config with a FIFO as capacity_seed exited %d, want 1", code)
	}
	t.Setenv("VLLM_A_KEY", "sk-a") // good.yml's target reads its key from there
	if code := run([]string{"check-config", "../../config/testdata/good.yml"}); code != 0 {
		t.Errorf("check-config on a good file exited %d, want 0", code)
	}
}

// TestReloadChangingInFlightCap reloads with another max_in_flight while
// probes run: every loop must stop and restart without hanging.
func TestReloadChangingInFlightCap(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", "sk-test")
	simSrv := startTinySim(t, 20)
	cfgFile := filepath.Join(t.TempDir(), "headroom.yml")
	write := func(cap int) {
		if err := os.WriteFile(cfgFile, []byte(testConfig(simSrv.URL, "short")+fmt.Sprintf("max_in_flight: %d\ncalibration: {enabled: false}\n", cap)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	base, _ := startDaemon(t, cfgFile)
	ttft := `headroom_probe_ttft_seconds{scenario=short,target=sim}`
	for _, c := range []int{2, 1, 3} {
		before := scrape(t, base)[ttft]
		write(c)
		done := make(chan error, 1)
		go func() {
			resp, err := http.Post(base+"/-/reload", "", nil)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("reload hung")
		}
		waitFor(t, "probes after the reload", func() bool { return scrape(t, base)[ttft] > before })
	}
}

// checkContract holds every headroom_ family on a daemon's page to the
// metric contract: its name, type and labels.
func checkContract(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	mfs, err := exposition.Families(resp.Body, 64<<20, func(name string) bool { return strings.HasPrefix(name, "headroom_") })
	if err != nil {
		t.Fatal(err)
	}
	for name, mf := range mfs {
		c, ok := contract.Lookup(name)
		if !ok {
			t.Errorf("%s is not in the metric contract", name)
			continue
		}
		if typ := strings.ToLower(mf.GetType().String()); typ != c.Type {
			t.Errorf("%s is a %s, the contract says %s", name, typ, c.Type)
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName())
			}
			slices.Sort(labels)
			if !slices.Equal(labels, c.Labels) {
				t.Errorf("%s has labels %v, the contract %v", name, labels, c.Labels)
				break
			}
		}
	}
}
