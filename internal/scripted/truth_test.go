package scripted

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/sim"
)

// Truths of laws simple enough to derive by hand: the closed loop and the
// interpolation agree with the closed form.
func TestTruthClosedForm(t *testing.T) {
	tests := []struct {
		name           string
		law            Law
		prompt, output int
		u              config.UseCase
		want           float64
	}{
		// Every request of a closed loop meets n-1 others at arrival:
		// 0.2 + 0.3 (n-1) <= 2 holds up to n = 7, exactly.
		{"linear TTFT", Law{Overhead: 0.2, TTFTPerOther: 0.3, ITLBase: 0.01, ITLPower: 1, ITLAtArrival: true},
			1000, 16, config.UseCase{TTFTMax: 2 * time.Second}, 7},
		// ITL 10 ms + 2 ms (n-1) <= 50 ms, 20 tokens/s, up to n = 21.
		{"linear decode", Law{Overhead: 0.2, ITLBase: 0.01, ITLSlope: 0.002, ITLPower: 1, ITLAtArrival: true},
			1000, 64, config.UseCase{DecodeMinTPS: 20}, 21},
		// One prefill of 1 s at a time, decode 10 ms: the first round's
		// TTFTs are 1..n s, mean (n+1)/2; each of the second round's
		// arrives 10 ms after the request it replaces ended and waits for
		// the n-1 prefills queued before it: n - 0.01 s. The mean over
		// both, (3n + 0.98)/4, is linear in n, so the interpolation is
		// exact: 5 s is reached at n = (20 - 0.98)/3.
		{"fcfs prefill", Law{PrefillPerToken: 1e-3, SerialPrefill: true, ITLBase: 0.01, ITLPower: 1},
			1000, 2, config.UseCase{TTFTMax: 5 * time.Second}, (20 - 0.98) / 3},
		// Steps of 10 ms + 1 ms per decoding sequence, prefill free and a
		// chunk holding every prompt: n requests prefill in one step
		// together, then decode at 10 + n ms a token. 16 tokens/s at most
		// 62.5 ms a token: n = 52.5, between 52 and 53 linearly in speed's
		// margin.
		{"chunked steps", Law{Chunk: 1 << 20, StepBase: 0.01, StepPerSeq: 0.001},
			100, 32, config.UseCase{DecodeMinTPS: 16}, 52 + (1000.0/62-16)/((1000.0/62-16)-(1000.0/63-16))},
		// Two experts, one per token, 10 ms to read each: a batch of n
		// reads 2(1 − 2^−n) of them, so ITL is 10 + 10(1 − 2^(1−n)) ms,
		// 15 ms at n = 2 (66.7 tokens/s) and 17.5 at 3 (57.1): 60 tokens/s
		// is crossed at 2 + (1/9)/(1/9 + 1/21) = 2.7 of the margin.
		{"moe experts", Law{Overhead: 0.2, ITLBase: 0.01, ITLPower: 1, ITLAtArrival: true, Experts: 2, Active: 1, ExpertRead: 0.01},
			1000, 64, config.UseCase{DecodeMinTPS: 60}, 2.7},
		// A KV cache of 3 requests of 1101 tokens; prefill 0.5 s, decode
		// 100 x 10 ms, so a request ends E = 1.5 s after it is admitted.
		// Up to 3 never wait: TTFT 0.5 s. With 4, one of each round waits
		// for E, and the fourth of the second round for E again: 8
		// requests, 6 with TTFT 0.5 s and 2 with E + 0.5 s, mean 0.5 +
		// E/4 = 0.875 s. 0.8 s is crossed at 3 + (0.8-0.5)/(E/4) = 3.8.
		{"kv cliff", Law{Overhead: 0.5, ITLBase: 0.01, ITLPower: 1, KVTokens: 3 * 1101, BlockSize: 1},
			1000, 101, config.UseCase{TTFTMax: 800 * time.Millisecond}, 3.8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.law.Truth(tc.prompt, tc.output, tc.u); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("truth %.6f, want %.6f", got, tc.want)
			}
		})
	}
}

// A lone prompt of L tokens takes ceil(L/Chunk) steps to its first token.
func TestChunkedSteps(t *testing.T) {
	l := Law{Chunk: 300, StepBase: 0.1}
	if c := l.Closed(1000, 2, 1); math.Abs(c.TTFT-0.4) > 1e-9 || math.Abs(c.E2E-0.5) > 1e-9 {
		t.Errorf("TTFT %.3f s and E2E %.3f s, want 4 and 5 steps of 0.1 s", c.TTFT, c.E2E)
	}
}

// The truth of a noisy law scales by the noise's mean factors: the
// factors the server draws average to them.
func TestNoiseMeans(t *testing.T) {
	l := Families()[7].Draw(1)
	if l.Family != "noise" {
		t.Fatalf("family %s", l.Family)
	}
	w := newWorld(&l, nil)
	const n = 200000
	var sum, inv float64
	g := rand.New(rand.NewPCG(1, 2))
	for range n {
		// The world's draws, without an engine: the same code as add.
		r := w.noise(g)
		sum += r.mT
		inv += 1 / r.mI
	}
	m, mi := l.noiseMeans()
	if math.Abs(sum/n-m) > 0.01*m || math.Abs(inv/n-mi) > 0.01*mi {
		t.Errorf("drawn factors average %.4f and %.4f (inverse), the truth scales by %.4f and %.4f", sum/n, inv/n, m, mi)
	}
}

// The suite's laws' truths for the default use cases, per family: their
// spread and which threshold binds (the one breached first past the
// capacity). The ranges are drawn so that capacities span about 1 to 100
// and more than one threshold binds.
func TestTruthDistribution(t *testing.T) {
	reports, err := sim.Reports()
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]int{}
	for _, sc := range config.DefaultScenarios() {
		inputs[sc.Name] = sc.InputTokens
	}
	outputs := map[string]int{}
	for _, u := range reports[0].UseCases {
		outputs[u.Name] = u.Output
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "law\tuse case\tmin\tmedian\tmax\tbinding")
	var all []float64
	binding := map[string]int{}
	for _, f := range Families() {
		for _, u := range config.DefaultUseCases() {
			var truths []float64
			binds := map[string]int{}
			for seed := range uint64(SuiteSeeds) {
				l := f.Draw(seed + 1)
				in, out := inputs[u.Scenario], outputs[u.Name]
				truth := l.Truth(in, out, u)
				if math.IsNaN(truth) || math.IsInf(truth, 0) || truth < 0 {
					t.Errorf("%s, %s: truth %g", l.Family, u.Name, truth)
					continue
				}
				truths = append(truths, truth)
				_, name := Margin(l.Closed(in, out, int(truth)+1), u)
				binds[name]++
				if u.E2EMax == 0 {
					binding[name]++
				}
			}
			all = append(all, truths...)
			slices.Sort(truths)
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%v\n", f.Name, u.Name, truths[0], truths[len(truths)/2], truths[len(truths)-1], binds)
		}
	}
	tw.Flush()
	t.Log("\n" + b.String())
	slices.Sort(all)
	if all[0] > 2 || all[len(all)-1] < 50 {
		t.Errorf("truths from %.1f to %.1f, want some at 2 or less and some at 50 or more", all[0], all[len(all)-1])
	}
	// Of the use cases with two thresholds, each binds in a tenth at least.
	for _, name := range []string{"ttft_seconds", "decode_tokens_per_second"} {
		if n := binding[name]; 10*n < binding["ttft_seconds"]+binding["decode_tokens_per_second"] {
			t.Errorf("%s binds in %d of the two-threshold truths (%v)", name, n, binding)
		}
	}
}
