package estimator

import (
	"encoding/json"
	"maps"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/probe"
)

// The cached estimates are those a fresh estimator computes from the same
// points at the same moment and load: as probes come (lone and in bursts),
// as the load changes, and as points leave each use case's window and then
// its curve window with no probe recorded meanwhile. Asked again with
// nothing changed, the estimator computes nothing.
func TestCachedEstimatesAreFresh(t *testing.T) {
	cfg, err := config.Parse([]byte(`
targets: [{name: a, url: 'http://h'}, {name: b, url: 'http://h2'}]
scenarios: [{name: s, input_tokens: 1024, output_tokens: 16}, {name: l, input_tokens: 8192, output_tokens: 16}]
use_cases:
  - {name: short, scenario: s, ttft_max: 1s, itl_max: 50ms, window: 1m, curve_window: 4m}
  - {name: long, scenario: l, ttft_max: 4s, window: 2m, curve_window: 3m}
`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := func(target, scenario string, at time.Time, load float64, burst int, ttft time.Duration) monitor.Sample {
		return monitor.Sample{Target: target, Scenario: scenario, Time: at, Load: load, InFlight: load, Sent: load, Burst: burst,
			Result: probe.Result{Outcome: probe.Success, TTFT: ttft, CompletionTokens: 16, Decode: 15 * (20*time.Millisecond + time.Duration(load)*2*time.Millisecond)}}
	}
	e := New(cfg, nil)
	var recorded []monitor.Sample
	placed := 0 // estimates with a capacity and free requests
	record := func(s monitor.Sample) {
		recorded = append(recorded, s)
		e.Record(s)
	}
	loads := []engine.Load{{Running: 0, Waiting: 0, KVTokens: 100000}, {Running: 2, Waiting: 1, KVTokens: 100000}, {Running: 1}}
	for step := range 48 {
		now := t0.Add(time.Duration(step) * 10 * time.Second)
		if step < 18 {
			for _, target := range []string{"a", "b"} {
				sc, base := "s", 200*time.Millisecond
				if step%3 == 1 {
					sc, base = "l", 1500*time.Millisecond
				}
				record(sample(target, sc, now, 1, 0, base+time.Duration(step)*time.Millisecond))
				if step%4 == 2 {
					n := 2 + 2*(step/4%2)
					for k := range n {
						record(sample(target, sc, now, float64(n), n, base*time.Duration(k+1)))
					}
				}
			}
		}
		status := []collector.TargetStatus{
			{Name: "a", Up: true, Load: loads[step%len(loads)]},
			{Name: "b", Up: step%4 != 0, Load: loads[(step+1)%len(loads)]},
		}
		got := e.Estimates(status, now)
		for _, g := range got {
			if !math.IsNaN(g.Capacity) && !math.IsNaN(g.Free) {
				placed++
			}
		}
		cached := e.targets["a"].entry
		again := e.Estimates(status, now)
		if e.targets["a"].entry != cached {
			t.Errorf("step %d: asked again with nothing changed, the estimates were computed again", step)
		}
		fresh := New(cfg, nil)
		for _, s := range recorded {
			fresh.Record(s)
		}
		// The KV cache as the engine last said it, which the estimates
		// carry (kv_cache_tokens): the fresh estimator has read no load.
		e.mu.Lock()
		kv := maps.Clone(e.kv)
		e.mu.Unlock()
		fresh.mu.Lock()
		fresh.kv = kv
		fresh.mu.Unlock()
		want := fresh.Estimates(status, now)
		for _, g := range [][]any{{"first", got}, {"again", again}} {
			if a, b := jsonOf(t, g[1]), jsonOf(t, want); a != b {
				t.Fatalf("step %d (%s), at %s: cached\n%s\nfresh\n%s", step, g[0], now.Sub(t0), a, b)
			}
		}
	}
	if placed == 0 {
		t.Error("no estimate placed a capacity: the fits' path is not covered")
	}
	if n := len(e.Estimates(nil, t0.Add(time.Hour))[0].Points); n != 0 {
		t.Errorf("an hour on, %d points in the window", n)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A probe recorded has its target's estimates computed again in the
// background: the next question finds them in the cache.
func TestRecordRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := config.Parse([]byte("targets:\n  - {name: a, url: 'http://h'}\n" +
			"scenarios: [{name: s, input_tokens: 1024, output_tokens: 16}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		e := New(cfg, nil)
		for i := range 3 {
			e.Record(monitor.Sample{Target: "a", Scenario: "s", Time: time.Now(), Load: 1, InFlight: 1,
				Result: probe.Result{Outcome: probe.Success, TTFT: time.Second, CompletionTokens: 16, Decode: time.Second}})
			synctest.Wait()
			c := e.targets["a"].entry
			if c == nil || len(c.base) != 1 || c.base[0].Samples != i+1 {
				t.Fatalf("after probe %d, cached %+v", i+1, c)
			}
			e.Known("a") // at an unknown load: the refresh's own
			if e.targets["a"].entry != c {
				t.Errorf("after probe %d, computed again at the next question", i+1)
			}
		}
	})
}
