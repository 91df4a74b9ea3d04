package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/bench"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/probe"
)

// linearServer is an OpenAI-compatible server whose TTFT and ITL are linear in
// its load (background requests plus those in flight), known exactly.
type linearServer struct {
	bg, inflight atomic.Int64
	peak         atomic.Int64 // most chat requests in flight at once
	prompts      atomic.Int64 // prompt tokens prefilled, counted at the first token as vLLM does
	// slow multiplies every time (0: 1), so that the few milliseconds a
	// loaded machine adds to each request weigh less in the law's slope.
	slow float64
}

func (s *linearServer) load() int64 { return s.bg.Load() + s.inflight.Load() }

func (s *linearServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
	case "/tokenize":
		var q struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&q)
		n := 0
		for _, m := range q.Messages {
			n += len(strings.Fields(m.Content)) + 3
		}
		fmt.Fprintf(w, `{"count":%d}`, n)
	case "/metrics":
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} %d\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 0\n"+
			"# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{model_name=\"m\"} %d\n", s.load(), s.prompts.Load())
	case "/v1/chat/completions":
		if n := s.inflight.Add(1); n > s.peak.Load() {
			s.peak.Store(n) // racy max, but only this test's bursts raise it
		}
		start := time.Now()
		load := float64(s.load())
		ms := float64(time.Millisecond) * max(1, s.slow)
		ttft := time.Duration((20 + 10*load) * ms)
		itl := time.Duration((2 + 1*load) * ms)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range 8 {
			time.Sleep(time.Until(start.Add(ttft + time.Duration(i)*itl)))
			if i == 0 {
				s.prompts.Add(64)
			}
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x \"}}]}\n\n")
			fl.Flush()
		}
		// Done before the client can read the end: a reading the daemon
		// takes once a probe is over never counts it still running (a
		// deferred decrement raced the next burst's reading under -race).
		s.inflight.Add(-1)
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":8}}\n\ndata: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

// closedTruth is linearServer's capacity, slowed down or not, at its
// TTFT threshold (170 ms at 2x, 340 ms at 4x), by the reports' protocol:
// 20 + 10(3N+1)/4 = 85.
const closedTruth = (4*6.5 - 1) / 3.0

func TestCapacityOverHTTP(t *testing.T) {
	ls := &linearServer{slow: 2}
	srv := httptest.NewServer(ls)
	defer srv.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Go(func() { // background load steps through 0..9 requests
		for i := 0; ; i++ {
			ls.bg.Store(int64(i % 10))
			select {
			case <-ctx.Done():
				return
			case <-time.After(1500 * time.Millisecond):
			}
		}
	})
	// Each request pays for the requests in flight when it arrives, itself
	// included: 2 x (20 ms + 10 ms x load) for TTFT, 2 x (2 ms + 1 ms x
	// load) for ITL. N concurrent requests as the reports run them (two
	// rounds from a simultaneous start) meet 1..N in the first round and N
	// in the second: a mean TTFT of 2 x (20 + 10(3N+1)/4) ms, 170 ms at
	// N = 8.33 (the ITL's 21 ms at N = 11).
	// Slowed down twice: at 1x, the 5 ms a loaded 2-core machine adds to a
	// request cost half a request of capacity, and CI saw 5.94.
	var cfg strings.Builder
	// The shipped calibration: bursts give the laws their slope.
	fmt.Fprintf(&cfg, "targets:\n  - name: lin\n    url: %s\n    engine: vllm\nprobe_budget: 0.5\nengine_scrape_interval: 100ms\nscenarios:\n", srv.URL)
	for i := range 3 {
		fmt.Fprintf(&cfg, "  - {name: s%d, input_tokens: 64, output_tokens: 8, interval: 1s}\n", i)
	}
	cfg.WriteString("use_cases:\n")
	for i := range 3 {
		fmt.Fprintf(&cfg, "  - {name: u%d, scenario: s%d, statistic: p50, ttft_max: 170ms, itl_max: 21ms}\n", i, i)
	}
	cfgFile := filepath.Join(t.TempDir(), "headroom.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startDaemon(t, cfgFile)

	st := waitEstimates(t, base, 90*time.Second, func(e estimateJSON) bool { return e.Samples >= 25 })
	if len(st) != 3 {
		t.Fatalf("estimates: %+v", st)
	}
	for _, e := range st {
		t.Logf("%s: capacity %s [%s, %s] from %d samples", e.UseCase, fmtPtr(e.Capacity), fmtPtr(e.Lower), fmtPtr(e.Upper), e.Samples)
		if e.Capacity == nil || math.Abs(*e.Capacity-closedTruth) > 0.15*closedTruth {
			t.Errorf("%s: capacity %s from %d samples (%s), want %.2f within 15%%", e.UseCase, fmtPtr(e.Capacity), e.Samples, e.Why, closedTruth)
		}
	}
	m := scrape(t, base)
	if v, ok := m[`headroom_capacity_requests{target=lin,use_case=u0}`]; !ok || math.Abs(v-closedTruth) > 0.15*closedTruth {
		t.Errorf("headroom_capacity_requests = %v", v)
	}
	if v := m[`headroom_slo_threshold{slo=ttft_seconds,use_case=u0}`]; v != 0.17 {
		t.Errorf("headroom_slo_threshold ttft = %v", v)
	}
	if _, ok := m[`headroom_ratio{target=lin,use_case=u0}`]; !ok {
		t.Error("headroom_ratio missing")
	}
}

type estimateJSON struct {
	UseCase  string   `json:"use_case"`
	Capacity *float64 `json:"capacity"`
	Lower    *float64 `json:"capacity_lower"`
	Upper    *float64 `json:"capacity_upper"`
	Samples  int      `json:"samples"`
	Seed     int      `json:"seed_points"`
	Why      string   `json:"why"`
	Points   []struct {
		Load     *float64 `json:"load"`
		InFlight *float64 `json:"in_flight"`
		Burst    int      `json:"burst"`
		Level    *float64 `json:"level"`
	} `json:"points"`
}

// waitEstimates polls /api/v1/status until every estimate satisfies done.
func waitEstimates(t *testing.T, base string, limit time.Duration, done func(estimateJSON) bool) []estimateJSON {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(base + "/api/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Estimates []estimateJSON `json:"estimates"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		all := len(st.Estimates) > 0
		for _, e := range st.Estimates {
			all = all && done(e)
		}
		if all {
			return st.Estimates
		}
		if time.Now().After(deadline) {
			t.Fatalf("estimates not there in %s: %+v", limit, st.Estimates)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Calibration bursts give the laws their slope: a burst's probes arrive
// together, the i-th meeting i in flight. Production (a background of 0 to
// 4 requests) says what a request in flight costs one arriving, which no
// burst of an otherwise idle server can (docs/capacity-model.md). The law
// is slowed down four times, so that the few ms a loaded 2-core machine
// adds to a request weigh less in its slope.
func TestCalibrationBursts(t *testing.T) {
	ls := &linearServer{slow: 4}
	srv := httptest.NewServer(ls)
	defer srv.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Go(func() {
		for i := 0; ; i++ {
			ls.bg.Store(int64(i % 5))
			select {
			case <-ctx.Done():
				return
			case <-time.After(1500 * time.Millisecond):
			}
		}
	})
	cfg := fmt.Sprintf("targets:\n  - {name: lin, url: %s, engine: vllm}\nprobe_budget: 0.5\nengine_scrape_interval: 100ms\n"+
		"calibration: {enabled: true, max_burst: 8}\n"+
		"scenarios:\n  - {name: s, input_tokens: 64, output_tokens: 8, interval: 1s}\n"+
		"use_cases:\n  - {name: u, scenario: s, statistic: mean, ttft_max: 340ms}\n", srv.URL)
	path := filepath.Join(t.TempDir(), "headroom.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs := startDaemon(t, path)
	st := waitEstimates(t, base, 90*time.Second, func(e estimateJSON) bool { return e.Capacity != nil && e.Samples >= 20 })
	t.Logf("capacity %.2f from %d samples", *st[0].Capacity, st[0].Samples)
	if c := *st[0].Capacity; math.Abs(c-closedTruth) > 0.15*closedTruth {
		t.Errorf("capacity %.2f from %d samples, want %.2f within 15%%", c, st[0].Samples, closedTruth)
	}
	if p := ls.peak.Load(); p < 3 {
		t.Errorf("at most %d probes in flight at once: no burst", p)
	}
	// The server counts the burst's own probes and the background as
	// running. A lone probe met no other prefill: level 1.
	bursts, lone := 0, 0
	for _, p := range st[0].Points {
		if p.Burst == 0 {
			lone++
			if p.Level == nil || *p.Level != 1 {
				t.Errorf("lone probe at level %s, want 1", fmtPtr(p.Level))
			}
			continue
		}
		bursts++
		// Within float rounding: a burst whose probes all decoded over the
		// same span sums to its size as a ratio of durations (3.00 failed).
		if p.InFlight == nil {
			t.Errorf("burst of %d: no in_flight", p.Burst)
		} else if f := *p.InFlight; f < 1-1e-9 || f > float64(p.Burst)+4+1e-9 {
			t.Errorf("burst of %d: in_flight %v, want 1 to %d and the background's 4", p.Burst, f, p.Burst)
		}
	}
	if bursts == 0 || lone == 0 {
		t.Errorf("%d burst and %d lone points in the status, want both", bursts, lone)
	}
	if !strings.Contains(logs.String(), "calibration burst") {
		t.Error("no calibration burst logged")
	}
}

// A bench run of a server seeds the daemon: its capacity is known from the
// start, before the probes could carry an estimate; a seed that cannot be
// read fails the config load.
func TestCapacitySeededFromBench(t *testing.T) {
	ls := &linearServer{slow: 2} // as in TestCapacityOverHTTP
	srv := httptest.NewServer(ls)
	defer srv.Close()
	u := bench.UseCase{Name: "u", Context: 64, Output: 8, Statistic: "p50", TTFTMax: 0.17}
	rep := &bench.Report{Schema: bench.Schema, TimeScale: 1,
		Plan: bench.Plan{Contexts: []int{64}, Concurrency: []int{1, 2, 4, 8}, Output: 8, RequestsPerCell: 32, UseCases: []bench.UseCase{u}}}
	r := &bench.Runner{Prober: probe.NewProber(probe.Endpoint{BaseURL: srv.URL, Client: probe.NewClient(false)}, "chat", "", "vllm"),
		Logger: slog.New(slog.DiscardHandler)}
	if err := r.Run(t.Context(), rep); err != nil {
		t.Fatal(err)
	}
	// The server counts a request's load on arrival, so a closed loop's first
	// round sees fewer than n: several rounds put the median at n.
	if l := rep.Limits[0]; l.Capped || math.Abs(l.Capacity-6.5) > 0.5 {
		t.Errorf("bench limit %s, want 6.5 ± 0.5", l)
	}
	dir := t.TempDir()
	seed := filepath.Join(dir, "report.json")
	if err := rep.Save(seed); err != nil {
		t.Fatal(err)
	}
	// No background load: probes alone see load 1 only and cannot estimate.
	write := func(seed string) string {
		cfg := fmt.Sprintf("targets:\n  - {name: lin, url: %s, engine: vllm, capacity_seed: %s}\n"+
			"scenarios:\n  - {name: s, input_tokens: 64, output_tokens: 8, interval: 1h}\n"+
			"use_cases:\n  - {name: u, scenario: s, statistic: p50, ttft_max: 170ms}\n", srv.URL, seed)
		path := filepath.Join(dir, "headroom.yml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if _, err := newDaemon(slog.New(slog.DiscardHandler), fleet.Shard{}, func() (*config.Config, error) { return config.Load(write(filepath.Join(dir, "missing.json"))) }); err == nil ||
		!strings.Contains(err.Error(), "targets[0].capacity_seed") {
		t.Errorf("missing seed: %v, want an error naming targets[0].capacity_seed", err)
	}
	base, _ := startDaemon(t, write(seed))
	st := waitEstimates(t, base, 10*time.Second, func(estimateJSON) bool { return true })
	if len(st) != 1 {
		t.Fatalf("estimates: %+v", st)
	}
	e := st[0]
	// The bench's cells are steady closed loops (6.5 above); the model
	// reads them as the reports' two rounds (closedTruth). A seed alone
	// gives an estimate, not 2x off.
	if e.Capacity == nil || *e.Capacity < closedTruth/2 || *e.Capacity > 2*closedTruth || e.Seed != 4*32 {
		t.Errorf("seeded capacity %s from %d seed points, %d samples (%s); want within 2x of %.2f from 128", fmtPtr(e.Capacity), e.Seed, e.Samples, e.Why, closedTruth)
	}
}

func fmtPtr(v *float64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%.2f", *v)
}
