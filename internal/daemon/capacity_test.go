package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/bench"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/internal/daemon"
	"github.com/headroom-dev/headroom/probe"
)

// linearServer is an OpenAI-compatible server whose TTFT and ITL are linear in
// its load (background requests plus those in flight), known exactly: in
// virtual time, nothing else adds to them.
type linearServer struct {
	bg, inflight atomic.Int64
	peak         atomic.Int64 // most chat requests in flight at once
	prompts      atomic.Int64 // prompt tokens prefilled, counted at the first token as vLLM does
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
		// Read whole, as a server reads a request before it answers: the
		// client's request is written only once it has been read.
		_, _ = io.Copy(io.Discard, r.Body)
		if n := s.inflight.Add(1); n > s.peak.Load() {
			s.peak.Store(n) // racy max, but only this test's bursts raise it
		}
		start := time.Now()
		load := float64(s.load())
		ttft := time.Duration((20 + 10*load) * float64(time.Millisecond))
		itl := time.Duration((2 + 1*load) * float64(time.Millisecond))
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
		// takes once a probe is over never counts it still running.
		s.inflight.Add(-1)
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":8}}\n\ndata: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

// steps holds the server's background load at each of levels in turn, every
// hold, until the test ends.
func (w *world) steps(s *linearServer, levels int, hold time.Duration) {
	w.wg.Go(func() {
		for i := 0; ; i++ {
			s.bg.Store(int64(i % levels))
			select {
			case <-w.ctx.Done():
				return
			case <-time.After(hold):
			}
		}
	})
}

// closedTruth is linearServer's capacity at its TTFT threshold of 85 ms, by
// the reports' protocol: N concurrent requests, two rounds from a
// simultaneous start, meet 1..N in flight in the first round and N in the
// second, a mean TTFT of 20 + 10(3N+1)/4 ms, 85 ms at N = 8.33 (the ITL's
// 10.5 ms at N = 8.5).
const closedTruth = (4*6.5 - 1) / 3.0

func TestCapacityOverHTTP(t *testing.T) {
	t.Parallel() // seconds to a minute each under -race: two at a time on two cores
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		ls := &linearServer{}
		url := w.serve("lin", ls)
		w.steps(ls, 10, 1500*time.Millisecond) // background load steps through 0..9 requests
		// The shipped calibration: bursts give the laws their slope.
		var cfg strings.Builder
		fmt.Fprintf(&cfg, "targets:\n  - name: lin\n    url: %s\n    engine: vllm\nprobe_budget: 0.5\nengine_scrape_interval: 100ms\nscenarios:\n", url)
		for i := range 3 {
			fmt.Fprintf(&cfg, "  - {name: s%d, input_tokens: 64, output_tokens: 8, interval: 1s}\n", i)
		}
		cfg.WriteString("use_cases:\n")
		for i := range 3 {
			fmt.Fprintf(&cfg, "  - {name: u%d, scenario: s%d, statistic: p50, ttft_max: 85ms, itl_max: 10500us}\n", i, i)
		}
		d := w.startDaemon(writeConfig(t, "", cfg.String()))
		st := d.waitEstimates(2*time.Minute, func(e estimateJSON) bool { return e.Samples >= 25 })
		if len(st) != 3 {
			t.Fatalf("estimates: %+v", st)
		}
		for _, e := range st {
			t.Logf("%s: capacity %s [%s, %s] from %d samples", e.UseCase, fmtPtr(e.Capacity), fmtPtr(e.Lower), fmtPtr(e.Upper), e.Samples)
			if e.Capacity == nil || math.Abs(*e.Capacity-closedTruth) > 0.15*closedTruth {
				t.Errorf("%s: capacity %s from %d samples (%s), want %.2f within 15%%", e.UseCase, fmtPtr(e.Capacity), e.Samples, e.Why, closedTruth)
			}
		}
		m := d.scrape()
		if v, ok := m[`headroom_capacity_requests{target=lin,use_case=u0}`]; !ok || math.Abs(v-closedTruth) > 0.15*closedTruth {
			t.Errorf("headroom_capacity_requests = %v", v)
		}
		if v := m[`headroom_slo_threshold{slo=ttft_seconds,use_case=u0}`]; v != 0.085 {
			t.Errorf("headroom_slo_threshold ttft = %v", v)
		}
		if _, ok := m[`headroom_ratio{target=lin,use_case=u0}`]; !ok {
			t.Error("headroom_ratio missing")
		}
	})
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

// waitEstimates reads /api/v1/status every second of virtual time until
// every estimate satisfies done, for at most within.
func (r *runningDaemon) waitEstimates(within time.Duration, done func(estimateJSON) bool) []estimateJSON {
	r.w.t.Helper()
	var st struct {
		Estimates []estimateJSON `json:"estimates"`
	}
	waitFor(r.w.t, "estimates", within, func() bool {
		if err := json.Unmarshal([]byte(r.get("/api/v1/status")), &st); err != nil {
			r.w.t.Fatal(err)
		}
		all := len(st.Estimates) > 0
		for _, e := range st.Estimates {
			all = all && done(e)
		}
		return all
	})
	return st.Estimates
}

// Calibration bursts give the laws their slope: a burst's probes arrive
// together, the i-th meeting i in flight. Production (a background of 0 to
// 4 requests) says what a request in flight costs one arriving, which no
// burst of an otherwise idle server can (docs/capacity-model.md).
func TestCalibrationBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		ls := &linearServer{}
		url := w.serve("lin", ls)
		w.steps(ls, 5, 1500*time.Millisecond)
		cfg := fmt.Sprintf("targets:\n  - {name: lin, url: %s, engine: vllm}\nprobe_budget: 0.5\nengine_scrape_interval: 100ms\n"+
			"calibration: {enabled: true, max_burst: 8}\n"+
			"scenarios:\n  - {name: s, input_tokens: 64, output_tokens: 8, interval: 1s}\n"+
			"use_cases:\n  - {name: u, scenario: s, statistic: mean, ttft_max: 85ms}\n", url)
		d := w.startDaemon(writeConfig(t, "", cfg))
		st := d.waitEstimates(2*time.Minute, func(e estimateJSON) bool { return e.Capacity != nil && e.Samples >= 20 })
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
		if !strings.Contains(d.logs.String(), "calibration burst") {
			t.Error("no calibration burst logged")
		}
	})
}

// A bench run of a server seeds the daemon: its capacity is known from the
// start, before the probes could carry an estimate; a seed that cannot be
// read fails the config load.
func TestCapacitySeededFromBench(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		ls := &linearServer{}
		url := w.serve("lin", ls)
		u := bench.UseCase{Name: "u", Context: 64, Output: 8, Statistic: "p50", TTFTMax: 0.085}
		rep := &bench.Report{Schema: bench.Schema, TimeScale: 1,
			Plan: bench.Plan{Contexts: []int{64}, Concurrency: []int{1, 2, 4, 8}, Output: 8, RequestsPerCell: 32, UseCases: []bench.UseCase{u}}}
		r := &bench.Runner{Prober: probe.NewProber(probe.Endpoint{BaseURL: url, Client: w.client}, "chat", "", "vllm"),
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
			return writeConfig(t, dir, fmt.Sprintf("targets:\n  - {name: lin, url: %s, engine: vllm, capacity_seed: %s}\n"+
				"scenarios:\n  - {name: s, input_tokens: 64, output_tokens: 8, interval: 1h}\n"+
				"use_cases:\n  - {name: u, scenario: s, statistic: p50, ttft_max: 85ms}\n", url, seed))
		}
		missing := write(filepath.Join(dir, "missing.json"))
		if _, err := daemon.New(slog.New(slog.DiscardHandler), fleet.Shard{}, func() (*config.Config, error) { return config.Load(missing) }); err == nil ||
			!strings.Contains(err.Error(), "targets[0].capacity_seed") {
			t.Errorf("missing seed: %v, want an error naming targets[0].capacity_seed", err)
		}
		d := w.startDaemon(write(seed))
		st := d.waitEstimates(10*time.Second, func(estimateJSON) bool { return true })
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
	})
}

func fmtPtr(v *float64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%.2f", *v)
}
