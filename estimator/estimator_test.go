package estimator

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/probe"
)

// Estimates take each target's load from its engine (NaN while it is down)
// and its scenario's next probe; a reload that drops a target forgets its
// points.
func TestEstimatesFollowStatusAndConfig(t *testing.T) {
	cfg, err := config.Parse([]byte("targets:\n  - {name: a, url: 'http://h'}\n  - {name: b, url: 'http://h2'}\n" +
		"scenarios: [{name: s, input_tokens: 1024, output_tokens: 16}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := New(cfg, nil)
	now := time.Now()
	for _, target := range []string{"a", "b"} {
		e.Record(monitor.Sample{Target: target, Scenario: "s", Time: now, Load: 1, InFlight: 1,
			Result: probe.Result{Outcome: probe.Success, TTFT: time.Second, CompletionTokens: 16, Decode: time.Second}})
	}
	next := now.Add(time.Minute)
	status := []collector.TargetStatus{
		{Name: "a", Up: true, Load: engine.Load{Running: 2, Waiting: 1}, Next: map[string]time.Time{"s": next}},
		{Name: "b", Up: false, Load: engine.Load{Running: 9, Waiting: 9}},
	}
	got := e.Estimates(status, now)
	if len(got) != 2 || got[0].Load != 3 || !got[0].NextProbe.Equal(next) || !math.IsNaN(got[1].Load) || got[0].Samples != 1 || got[1].Samples != 1 {
		t.Fatalf("estimates %+v", got)
	}
	only, err := config.Parse([]byte("targets:\n  - {name: a, url: 'http://h'}\n" +
		"scenarios: [{name: s, input_tokens: 1024, output_tokens: 16}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.Estimates([]collector.TargetStatus{{Name: "b", Up: true, Load: engine.Load{Running: 1, KVTokens: 1000}}}, now)
	if e.kv["b"] != 1000 {
		t.Fatalf("b's KV cache size %v, want 1000", e.kv["b"])
	}
	e.Configure(only, nil)
	if _, ok := e.kv["b"]; ok {
		t.Error("b's KV cache size is kept after it left")
	}
	e.Configure(cfg, nil) // b back: its old points are gone
	if got := e.Estimates(status, now); got[1].Samples != 0 || got[0].Samples != 1 {
		t.Errorf("after b left and came back: %d and %d samples, want 1 and 0", got[0].Samples, got[1].Samples)
	}
	// a's scenario leaves a (another is probed instead), its points with it.
	other, err := config.Parse([]byte("targets:\n  - {name: a, url: 'http://h', scenarios: [t]}\n" +
		"scenarios: [{name: s, input_tokens: 1024, output_tokens: 16}, {name: t, input_tokens: 64, output_tokens: 16}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.Configure(other, nil)
	if n := len(e.store.Window("a", "s", now.Add(-time.Hour))); n != 0 {
		t.Errorf("%d points of a scenario a is no longer probed with", n)
	}
}

// Bursts go first to use cases with none, then to those with no capacity
// to go by, then to those whose capacity they refine.
func TestBurstRank(t *testing.T) {
	burst := func(level float64) capacity.Point { return capacity.Point{Load: level, Burst: int(level)} }
	lone := capacity.Point{Load: 4, Burst: 0}
	tests := []struct {
		name string
		est  capacity.Estimate
		want int
	}{
		{"no burst yet", capacity.Estimate{Capacity: 3, Points: []capacity.Point{lone}}, 0},
		{"a burst of one only", capacity.Estimate{Capacity: 3, Points: []capacity.Point{{Load: 1, Burst: 1}}}, 0},
		{"no capacity", capacity.Estimate{Capacity: math.NaN(), Points: []capacity.Point{lone, burst(3)}}, 1},
		{"a bound", capacity.Estimate{Capacity: math.NaN(), Lower: 6, Bound: "lower", Points: []capacity.Point{burst(3)}}, 1},
		{"an estimate", capacity.Estimate{Capacity: 24, Points: []capacity.Point{burst(3), burst(12)}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := burstRank(tc.est); got != tc.want {
				t.Errorf("rank %d, want %d", got, tc.want)
			}
		})
	}
}

// Targets with the same use cases share one spec, not a copy each; one
// probed with other scenarios, or seeded, has its own.
func TestTargetsShareSpecs(t *testing.T) {
	cfg, err := config.Parse([]byte("targets:\n  - {name: a, url: 'http://h'}\n  - {name: b, url: 'http://h2'}\n" +
		"  - {name: c, url: 'http://h3', scenarios: [t]}\n  - {name: d, url: 'http://h4'}\n" +
		"scenarios: [{name: s, input_tokens: 1024, output_tokens: 16}, {name: t, input_tokens: 64, output_tokens: 16}]\n" +
		"use_cases: [{name: u, scenario: s, ttft_max: 1s}, {name: v, scenario: t, ttft_max: 1s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	seeds := Seeds{"d": {"s": {{Time: time.Now(), Level: 2, TTFT: 1}}}}
	e := New(cfg, seeds)
	a, b, c, d := e.targets["a"].spec, e.targets["b"].spec, e.targets["c"].spec, e.targets["d"].spec
	if len(a.us) != 2 || &a.us[0] != &b.us[0] || &a.cus[0] != &b.cus[0] {
		t.Errorf("a and b have their own copies of one spec: %p, %p", a.us, b.us)
	}
	if len(c.us) != 1 || c.us[0].Name != "v" {
		t.Errorf("c's use cases %+v, want v alone", c.us)
	}
	if len(d.us) != 2 || &d.us[0] == &a.us[0] || len(d.seeds[0]) != 1 {
		t.Errorf("d's spec %+v is a's, or lost its seed", d)
	}
}

// The engine's decode readings are kept for the ITL laws only where the
// engine says the KV tokens their batch held (Decoded), for its window, and
// go with the target.
func TestDecodedReadingsNeedTheirKV(t *testing.T) {
	cfg, err := config.Parse([]byte("targets: [{name: a, url: 'http://h'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := New(cfg, nil)
	now := time.Now()
	for i, kv := range []float64{math.NaN(), 60000, math.NaN(), 90000} {
		e.Decoded("a", monitor.Decode{Time: now.Add(time.Duration(i) * monitor.DecodeSpan), Running: 6, ITL: 0.02, KV: kv})
	}
	got := e.engine.Window("a", "", now.Add(-time.Hour))
	if len(got) != 2 || got[0].KV != 60000 || got[1].KV != 90000 || !got[0].Engine || got[0].Held != 6 {
		t.Errorf("kept %+v, want the two readings with their KV, as the engine's", got)
	}
	e.Reset("a")
	if got := e.engine.Window("a", "", now.Add(-time.Hour)); len(got) != 0 {
		t.Errorf("kept %d readings after the target's server changed", len(got))
	}
}

// A bound says what holds calibration back once no burst can go further:
// the bursts reached max_burst, or the largest burst the probe budget pays
// for within the use case's window, or calibration is off. Below its limit
// it says nothing: the next burst will come (the status page promises it).
func TestABoundSaysWhatHoldsCalibration(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		burst     int
		limit     int
		by        string
	}{
		{"bursts at max_burst", "calibration: {enabled: true, max_burst: 4}\n", 4, 4, "calibration.max_burst"},
		{"bursts under max_burst", "calibration: {enabled: true, max_burst: 8}\n", 4, 0, ""},
		{"calibration off", "calibration: {enabled: false}\n", 4, 0, "calibration.enabled"},
		// 0.2% of a 30-minute window is 3.6 s; a burst's probes queue for
		// 0.5 s of prefill each after a 0.5 s decode: six of them.
		{"bursts at what the budget pays for", "probe_budget: 0.002\n", 6, 6, "probe_budget"},
		{"bursts under what the budget pays for", "probe_budget: 0.002\n", 4, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("targets: [{name: a, url: 'http://h'}]\n" +
				"scenarios: [{name: s, input_tokens: 1024, output_tokens: 16}]\nuse_cases: [{name: u, scenario: s, ttft_max: 10s}]\n" + tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			e := New(cfg, nil)
			now := time.Now()
			sample := func(at time.Time, load float64, burst int, ttft time.Duration) monitor.Sample {
				return monitor.Sample{Target: "a", Scenario: "s", Time: at, Load: load, InFlight: load, Sent: load, Burst: burst,
					Result: probe.Result{Outcome: probe.Success, TTFT: ttft, E2E: ttft + 500*time.Millisecond, CompletionTokens: 16, Decode: 500 * time.Millisecond}}
			}
			e.Record(sample(now.Add(-10*time.Minute), 1, 0, 500*time.Millisecond))
			for i := range tc.burst {
				e.Record(sample(now.Add(-5*time.Minute), float64(tc.burst), tc.burst, 500*time.Millisecond+time.Duration(i)*20*time.Millisecond))
			}
			got := e.Estimates([]collector.TargetStatus{{Name: "a", Up: true}}, now)
			if len(got) != 1 || got[0].Bound == "" {
				t.Fatalf("want one bound, got %+v", got)
			}
			if got[0].BurstLimit != tc.limit || got[0].BurstLimitBy != tc.by {
				t.Errorf("burst limit %d by %q, want %d by %q (%s)", got[0].BurstLimit, got[0].BurstLimitBy, tc.limit, tc.by, got[0].Why)
			}
			// /api/v1/status says it too, and nothing where a burst will come.
			b, err := json.Marshal(got[0])
			if err != nil {
				t.Fatal(err)
			}
			if has := bytes.Contains(b, []byte(`"burst_limit_by":"`+tc.by+`"`)); has != (tc.by != "") || bytes.Contains(b, []byte(`"burst_limit_by"`)) != (tc.by != "") {
				t.Errorf("the estimate's JSON %s: burst_limit_by %q shown %v", b, tc.by, has)
			}
		})
	}
}
