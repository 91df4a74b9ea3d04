package monitor

import (
	"math"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/probe"
)

func TestDecodeSpan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func(running, count, sum float64) engine.Load {
		return engine.Load{Engine: "vllm", Running: running, ITLCount: count, ITLSum: sum, KVUsage: math.NaN(), KVTokens: math.NaN()}
	}
	nan := math.NaN()
	type reading struct {
		after    time.Duration // since the first reading
		l        engine.Load
		sent     int64 // probes sent so far (ownProbes.sent)
		inFlight bool
	}
	waiting := func(l engine.Load, w float64) engine.Load { l.Waiting = w; return l }
	kv := func(l engine.Load, usage float64) engine.Load { l.KVUsage, l.KVTokens = usage, 100000; return l }
	prompts := func(l engine.Load, tokens float64) engine.Load { l.PromptTokens = tokens; return l }
	scaled := func(l engine.Load) engine.Load { l.TimeScale = 10; return l }
	queued := func(l engine.Load, count float64) engine.Load { l.QueueCount = count; return l }
	for _, tc := range []struct {
		name     string
		readings []reading
		want     []Decode // the spans completed, in order
	}{
		{"a span's readings weigh the batch by its tokens; its tokens give the ITL",
			// (4² + 6² + 8²)/(4 + 6 + 8): a step of 8 yields twice the tokens of one of 4.
			[]reading{{0, read(4, 100, 1), 0, false}, {5 * time.Second, read(6, 150, 2), 0, false}, {DecodeSpan, read(8, 300, 4), 0, false}},
			[]Decode{{Time: t0, Running: 116.0 / 18, ITL: 3.0 / 200, KV: nan}}},
		{"nothing until a span is complete",
			[]reading{{0, read(4, 100, 1), 0, false}, {DecodeSpan - time.Second, read(4, 200, 2), 0, false}},
			nil},
		{"spans follow one another",
			[]reading{{0, read(2, 0, 0), 0, false}, {DecodeSpan, read(2, 100, 1), 0, false}, {2 * DecodeSpan, read(4, 300, 5), 0, false}},
			[]Decode{{Time: t0, Running: 2, ITL: 0.01, KV: nan}, {Time: t0.Add(DecodeSpan), Running: 20.0 / 6, ITL: 0.02, KV: nan}}},
		{"the share of its tokens decoded while prompts waited, and the KV tokens the batch held",
			[]reading{{0, kv(waiting(read(2, 0, 0), 1), 0.1), 0, false}, {DecodeSpan, kv(read(6, 100, 1), 0.3), 0, false}},
			[]Decode{{Time: t0, Running: 40.0 / 8, ITL: 0.01, Waiting: 2.0 / 8, KV: (2*10000 + 6*30000) / 8.0}}},
		{"the prompt tokens the engine took in, per second of the span",
			[]reading{{0, prompts(read(4, 100, 1), 5000), 0, false}, {DecodeSpan + 5*time.Second, prompts(read(4, 300, 4), 75000), 0, false}},
			[]Decode{{Time: t0, Running: 4, ITL: 3.0 / 200, KV: nan, Prompts: 2000}}},
		{"a simulator ten times real time: per second of its time",
			[]reading{{0, scaled(prompts(read(4, 100, 1), 5000)), 0, false}, {DecodeSpan + 5*time.Second, scaled(prompts(read(4, 300, 4), 75000)), 0, false}},
			[]Decode{{Time: t0, Running: 4, ITL: 3.0 / 200, KV: nan, Prompts: 200}}},
		{"the requests its queue took, per second: with the prompt tokens, production's mean prompt",
			[]reading{{0, queued(prompts(read(4, 100, 1), 5000), 10), 0, false}, {DecodeSpan + 5*time.Second, queued(prompts(read(4, 300, 4), 75000), 45), 0, false}},
			[]Decode{{Time: t0, Running: 4, ITL: 3.0 / 200, KV: nan, Prompts: 2000, Requests: 1}}},
		{"an engine without the queue's histogram",
			[]reading{{0, queued(read(4, 100, 1), nan), 0, false}, {DecodeSpan, queued(read(4, 300, 4), nan), 0, false}},
			[]Decode{{Time: t0, Running: 4, ITL: 3.0 / 200, KV: nan, Requests: nan}}},
		{"an engine without the prompt-token counter",
			[]reading{{0, prompts(read(4, 100, 1), nan), 0, false}, {DecodeSpan, prompts(read(4, 300, 4), nan), 0, false}},
			[]Decode{{Time: t0, Running: 4, ITL: 3.0 / 200, KV: nan, Prompts: nan}}},
		{"a probe of ours in flight at a reading: not production's alone",
			[]reading{{0, read(4, 100, 1), 0, false}, {5 * time.Second, read(5, 150, 2), 0, true}, {DecodeSpan, read(4, 300, 4), 1, false},
				{2 * DecodeSpan, read(4, 400, 5), 1, false}},
			[]Decode{{Time: t0.Add(DecodeSpan), Running: 4, ITL: 0.01, KV: nan}}},
		{"a probe of ours sent and ended between two readings",
			[]reading{{0, read(4, 100, 1), 0, false}, {DecodeSpan, read(4, 300, 4), 1, false}},
			nil},
		{"no tokens served: no decode",
			[]reading{{0, read(0, 100, 1), 0, false}, {DecodeSpan, read(0, 100, 1), 0, false}},
			nil},
		{"an engine without the histogram",
			[]reading{{0, read(4, nan, nan), 0, false}, {DecodeSpan, read(4, nan, nan), 0, false}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s decodeSpan
			var got []Decode
			for _, r := range tc.readings {
				if d, ok := s.add(r.l, t0.Add(r.after), ownProbes{sent: r.sent}, r.inFlight); ok {
					got = append(got, d)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			same := func(a, b, tol float64) bool { return math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) <= tol }
			for i := range got {
				g, w := got[i], tc.want[i]
				if !g.Time.Equal(w.Time) || !same(g.Running, w.Running, 1e-9) || !same(g.ITL, w.ITL, 1e-12) || !same(g.Waiting, w.Waiting, 1e-9) || !same(g.KV, w.KV, 1e-6) || !same(g.Prompts, w.Prompts, 1e-9) || !same(g.Requests, w.Requests, 1e-9) {
					t.Errorf("span %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// Production's mean prompt is read over any span whose first and last
// readings have none of our probes in flight, less the prompts of ours that
// ran between them: a server probed every few seconds (the demo's) has no
// span without a probe. Where one of ours was in flight at an edge, did not
// come back, or had a warm prefix, the engine's count of its prompt is not
// known and the span says nothing of production's.
func TestProductionsPromptsLessOurs(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func(prompts, requests float64) engine.Load {
		return engine.Load{Engine: "vllm", Running: 4, ITLCount: 100 * requests, ITLSum: requests, PromptTokens: prompts, QueueCount: requests, KVUsage: math.NaN(), KVTokens: math.NaN()}
	}
	cold := config.Scenario{Name: "ctx-8k", InputTokens: 8192, Cache: "cold"}
	warm := config.Scenario{Name: "ctx-8k-warm", InputTokens: 8192, Cache: "warm"}
	ok := probe.Result{Outcome: probe.Success, PromptTokens: 8200}
	// after is ours once the probes given have ended.
	after := func(sent int64, sc config.Scenario, results ...probe.Result) ownProbes {
		o := ownProbes{sent: sent}
		for _, r := range results {
			o.ended(r, sc)
		}
		return o
	}
	// Production takes 8 requests of 1,250 tokens over the span; the
	// engine's counters hold ours on top, however the probes ended.
	for _, tc := range []struct {
		name        string
		first, last ownProbes
		edge        [2]bool    // one of ours in flight at the first, the last reading
		ours        [2]float64 // the prompt tokens and requests of ours the engine counted
		want        float64    // production's mean prompt; NaN: none
	}{
		{"none of ours: the engine's own", ownProbes{}, ownProbes{}, [2]bool{}, [2]float64{}, 1250},
		{"two of ours ran between the readings: taken off", ownProbes{}, after(2, cold, ok, ok), [2]bool{}, [2]float64{16400, 2}, 1250},
		{"ours without the server's count: the scenario's", ownProbes{}, after(1, cold, probe.Result{Outcome: probe.Success}), [2]bool{}, [2]float64{8192, 1}, 1250},
		{"one of ours in flight at the last reading", ownProbes{}, ownProbes{sent: 1}, [2]bool{false, true}, [2]float64{8200, 1}, math.NaN()},
		{"one of ours in flight at the first reading", ownProbes{sent: 1}, after(1, cold, ok), [2]bool{true, false}, [2]float64{8200, 1}, math.NaN()},
		{"one of ours did not come back", ownProbes{}, after(1, cold, probe.Result{Outcome: probe.Timeout}), [2]bool{}, [2]float64{8200, 1}, math.NaN()},
		{"one of ours had a warm prefix", ownProbes{}, after(1, warm, ok), [2]bool{}, [2]float64{1000, 1}, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s decodeSpan
			s.add(read(10000, 10), t0, tc.first, tc.edge[0])
			d, _ := s.add(read(20000+tc.ours[0], 18+tc.ours[1]), t0.Add(DecodeSpan), tc.last, tc.edge[1])
			got := d.Prompts / d.Requests
			if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("production's mean prompt %v, want %v", got, tc.want)
			}
		})
	}
}

// The queue the capacity model reads is production's waiting prompts over
// time: one caught at a reading fades within a few DecodeSpans, a queue
// that stands stays, and an unknown reading forgets the mean.
func TestQueueMean(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	every := 5 * time.Second
	for _, c := range []struct {
		name     string
		readings []float64
		lo, hi   float64
	}{
		{"first reading", []float64{2}, 2, 2},
		{"one caught waiting, then none for a minute", append([]float64{1}, make([]float64, 12)...), 0.1, 0.15},
		{"a queue of three that stands", []float64{3, 3, 3, 3, 3, 3}, 3, 3},
		{"one in five readings", []float64{0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, 0.1, 0.35},
		{"unknown", []float64{2, 2, math.NaN()}, math.NaN(), math.NaN()},
	} {
		t.Run(c.name, func(t *testing.T) {
			var q queueMean
			got := 0.0
			for i, w := range c.readings {
				got = q.add(w, t0.Add(time.Duration(i)*every))
			}
			if math.IsNaN(c.lo) != math.IsNaN(got) || got < c.lo || got > c.hi {
				t.Errorf("mean %.3f, want [%v, %v]", got, c.lo, c.hi)
			}
		})
	}
}
