package sim

import (
	"math"
	"testing"
)

var flat = Params{MaxBatch: 4, KVCapacity: 10_000, ChunkBudget: 1000, StepBase: 0.001, DecodePerSeq: 0.001, DecodeExp: 1,
	PrefillPerToken: 1e-5, Overhead: 0.01, GPUs: 1, IdleWatts: 50, MaxWatts: 500}

func TestSingleRequestIsAnalytic(t *testing.T) {
	// 2500 prompt tokens in chunks of 1000, 1000, 500, then 9 decode steps.
	c := Closed(flat, 2500, 10, 1)
	prefill := 3*flat.StepBase + 2500*flat.PrefillPerToken
	step := flat.StepBase + flat.DecodePerSeq
	if want := flat.Overhead + prefill; math.Abs(c.TTFT-want) > 1e-9 {
		t.Errorf("TTFT %.6f, want %.6f", c.TTFT, want)
	}
	if want := 1 / step; math.Abs(c.Decode-want) > 1e-6 {
		t.Errorf("decode %.3f tok/s, want %.3f", c.Decode, want)
	}
	if want := flat.Overhead + prefill + 9*step; math.Abs(c.E2E-want) > 1e-9 {
		t.Errorf("E2E %.6f, want %.6f", c.E2E, want)
	}
}

// A prompt's attention cost is the same whole or in chunks, quadratic by
// default, and grows with the prompt as its exponent says otherwise.
func TestAttentionExponent(t *testing.T) {
	const long = 8 * attnRef
	quad := Params{PrefillAttn: 1e-9}
	for _, exp := range []float64{0, 2, 1.8, 2.2} {
		p := quad
		p.PrefillAttnExp = exp
		if whole, split := p.attention(0, long), p.attention(0, 5000)+p.attention(5000, long-5000); math.Abs(split-whole) > 1e-9*whole {
			t.Errorf("exp %g: chunks cost %g, the whole prompt %g", exp, split, whole)
		}
		k := exp
		if k == 0 {
			k = 2
		}
		// PrefillAttn*attnRef²/k*(L/attnRef)^k against PrefillAttn*L²/2.
		for _, l := range []int{attnRef, long} {
			ratio := p.attention(0, l) / quad.attention(0, l)
			if want := 2 / k * math.Pow(float64(l)/attnRef, k-2); math.Abs(ratio-want) > 1e-9 {
				t.Errorf("exp %g: a %d-token prompt costs %g of the quadratic, want %g", exp, l, ratio, want)
			}
		}
	}
}

func TestKVCapacityQueues(t *testing.T) {
	// Each request reserves 4010 tokens: two fit in 10000, the third waits.
	e := NewEngine(flat)
	for i := range 3 {
		if err := e.Submit(int64(i), 4000, 10); err != nil {
			t.Fatal(err)
		}
	}
	e.AdvanceTo(e.NextWake())
	e.Step(nil)
	if e.Running() != 2 || e.Waiting() != 1 {
		t.Fatalf("running %d waiting %d, want 2 and 1", e.Running(), e.Waiting())
	}
	if got := e.KVUsage(); math.Abs(got-0.802) > 1e-9 {
		t.Errorf("KV usage %.3f, want 0.802", got)
	}
	e.Cancel(0)
	e.Step(nil)
	if e.Running() != 2 || e.Waiting() != 0 {
		t.Fatalf("after cancel: running %d waiting %d, want 2 and 0", e.Running(), e.Waiting())
	}
	if err := e.Submit(9, 10_000, 1); err != ErrTooLong {
		t.Errorf("oversized request: %v, want ErrTooLong", err)
	}
}

func TestDecodeBeyondGraphBatchRunsEagerly(t *testing.T) {
	p := flat
	p.MaxBatch, p.PrefillSlots, p.GraphBatch, p.EagerStep = 8, 8, 4, 0.004
	for _, tc := range []struct {
		n    int
		want float64
	}{
		{4, p.StepBase + 4*p.DecodePerSeq},               // the largest captured batch
		{5, p.StepBase + 5*p.DecodePerSeq + p.EagerStep}, // one more runs eagerly
	} {
		e := NewEngine(p)
		for i := range tc.n {
			if err := e.Submit(int64(i), 100, 50); err != nil {
				t.Fatal(err)
			}
		}
		e.AdvanceTo(e.NextWake())
		e.Step(nil) // every prompt prefills in this one step
		if got := e.Step(nil); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("decode step of %d: %.4fs, want %.4fs", tc.n, got, tc.want)
		}
	}
}

func TestLoadSlowsEveryone(t *testing.T) {
	p := Tiny.Params
	prev := Closed(p, 4096, 64, 1)
	for _, n := range []int{2, 4, 8, 16} {
		c := Closed(p, 4096, 64, n)
		if c.TTFT <= prev.TTFT || c.Decode >= prev.Decode || c.Throughput <= prev.Throughput {
			t.Errorf("n=%d: TTFT %.4f decode %.1f throughput %.1f; want TTFT and throughput up, decode down from %.4f %.1f %.1f",
				n, c.TTFT, c.Decode, c.Throughput, prev.TTFT, prev.Decode, prev.Throughput)
		}
		prev = c
	}
	short, long := Closed(p, 4096, 64, 1).TTFT-p.Overhead, Closed(p, 65536, 64, 1).TTFT-p.Overhead
	if long/short <= 16 {
		t.Errorf("prefill of 16x the context took %.1fx the time; attention should make it more than 16x", long/short)
	}
}

func TestLimitInterpolates(t *testing.T) {
	// margin falls linearly, crossing zero at 6.5.
	got, capped := Limit(64, func(n int) float64 { return (6.5 - float64(n)) / 10 })
	if capped || math.Abs(got-6.5) > 1e-9 {
		t.Errorf("Limit = %v (capped %v), want 6.5", got, capped)
	}
	if got, capped := Limit(16, func(int) float64 { return 1 }); !capped || got != 16 {
		t.Errorf("never breached: %v %v, want 16 capped", got, capped)
	}
}

func TestTokenizer(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"", 0}, {"a", 1}, {"abc", 1}, {"abcd", 2}, {"the model, streams!", 1 + 2 + 1 + 3 + 1}} {
		if got := CountTokens(tc.in); got != tc.want {
			t.Errorf("CountTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if got := ChatTokens([]string{"abc"}); got != templateBase+templatePerMessage+1 {
		t.Errorf("ChatTokens = %d", got)
	}
}

// BenchmarkEngine reports simulated requests per second of virtual-time
// simulation: a closed loop of 32 requests, 8K context, 1024 output tokens.
func BenchmarkEngine(b *testing.B) {
	p, err := LookupProfile("qwen3-coder-30b-a3b-fp8-h200-vllm")
	if err != nil {
		b.Fatal(err)
	}
	reqs := 0
	for b.Loop() {
		reqs += Closed(p.Params, 8192, 1024, 32).Requests
	}
	b.ReportMetric(float64(reqs)/b.Elapsed().Seconds(), "sim-requests/s")
}

// A calibration burst on an idle server is a report cell's first wave. Where
// the engine prefills many prompts side by side (reports 000 and 001), the
// wave's requests all get their first token together, the second round comes
// back together too, and the wave alone has the cell's mean TTFT: a burst
// measures what a report measures. Where it prefills one prompt at a time
// (report 002), the second round comes back staggered and meets a shorter
// queue, and a wave of 16 waits longer than the cell's mean.
func TestBurstIsTheReportsFirstWave(t *testing.T) {
	tests := []struct {
		profile string
		same    bool
	}{
		{"qwen3-coder-next-fp8-h200-sglang", true},
		{"qwen3-coder-next-fp8-2x-rtx-pro-6000-sglang", true},
		{"qwen3-coder-30b-a3b-fp8-h200-vllm", false},
	}
	for _, tc := range tests {
		prof, err := LookupProfile(tc.profile)
		if err != nil {
			t.Fatal(err)
		}
		closed, burst := Closed(prof.Params, 32768, 1024, 16), Burst(prof.Params, 32768, 1024, 16)
		if same := math.Abs(burst.TTFT/closed.TTFT-1) < 0.02; same != tc.same {
			t.Errorf("%s: 16 at 32K: burst TTFT %.2f s, report protocol %.2f s; same within 2%%: %v, want %v",
				tc.profile, burst.TTFT, closed.TTFT, same, tc.same)
		}
	}
}

// A request handed in as a step ends meets the same engine whether the
// step after it was computed before it came or after: Server.Run computes
// each step at its start, and a client woken at that instant may run on
// either side of it. Its front end starts at its arrival either way.
func TestArrivalAtAStepEndWhateverTheOrder(t *testing.T) {
	run := func(stepFirst bool) (ttft, e2e float64) {
		e := NewEngine(flat)
		if err := e.Submit(1, 2500, 20); err != nil {
			t.Fatal(err)
		}
		e.AdvanceTo(e.NextWake())
		for range 5 { // prefill and a few decode steps
			e.Step(nil)
		}
		at := e.Now()
		var first, end float64
		emit := func(id int64, k EventKind, t float64) {
			switch {
			case id == 2 && k == FirstToken:
				first = t
			case id == 2 && k == Finished:
				end = t
			}
		}
		if stepFirst {
			e.Step(emit)
		}
		if err := e.SubmitAt(at, 2, 1000, 10); err != nil {
			t.Fatal(err)
		}
		for !e.Idle() {
			if e.Step(emit) == 0 {
				e.AdvanceTo(e.NextWake())
			}
		}
		return first - at, end - at
	}
	ttft, e2e := run(false)
	ttftLate, e2eLate := run(true)
	if ttft != ttftLate || e2e != e2eLate {
		t.Errorf("handed in before the step: TTFT %.4f s, E2E %.4f s; after it: %.4f s, %.4f s", ttft, e2e, ttftLate, e2eLate)
	}
}
