package capacity

import (
	"math"
	"slices"
	"testing"
)

// sloped is a use case's Slopes whose TTFT law slopes (so it measures the
// lag: τ0 − τq) and whose lone intercept is alone, with prompt tokens.
func sloped(prompt, alone, se, perAhead float64) Slopes {
	return Slopes{Prompt: prompt, TTFT: Slope{Intercept: alone, Value: perAhead, SE: se},
		TTFTAlone: Alone{Value: alone, SE: se, T: 2}, Lag: Measured{Value: alone - perAhead, SE: se}}
}

func TestCostsReadsTheLonePrefillsLessTheLag(t *testing.T) {
	// Report 002's simulator, roughly: 70 ms before the engine, and a
	// prefill whose cost per token grows with the prompt (attention).
	const overhead = 0.07
	code := sloped(1024, overhead+0.005, 0.001, 0.005)
	chat := sloped(8192, overhead+0.125, 0.004, 0.125)
	long := sloped(32768, overhead+1.25, 0.05, 1.25)
	for _, c := range []struct {
		name   string
		all    []Slopes
		tokens []float64
	}{
		{"three lengths", []Slopes{long, code, chat}, []float64{1024, 8192, 32768}},
		{"one length tells nothing", []Slopes{chat}, nil},
		{"an intercept within its band of the lag is no cost", []Slopes{code, chat, sloped(65536, overhead+0.5, 0.3, 0)}, []float64{1024, 8192}},
		{"the more precise of one length", []Slopes{chat, sloped(8192, overhead+0.2, 0.05, 0), code}, []float64{1024, 8192}},
		{"an intercept not fitted", []Slopes{code, {Prompt: 65536}, chat}, []float64{1024, 8192}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Costs(c.all)
			if !slices.Equal(got.Tokens, c.tokens) {
				t.Fatalf("lengths %v, want %v", got.Tokens, c.tokens)
			}
			if l := lag(c.all, 0); math.Abs(l-overhead) > 1e-3 {
				t.Fatalf("lag %v, want about %v", l, overhead)
			}
			for i, l := range got.Tokens {
				for _, s := range c.all {
					if want := s.TTFTAlone.Value - lag(c.all, 0); s.Prompt == l && s.TTFTAlone.SE < 0.01 && math.Abs(got.PerToken[i]*l-want) > 1e-9 {
						t.Errorf("%v tokens cost %v s, want %v: its intercept less the lag", l, got.PerToken[i]*l, want)
					}
				}
			}
		})
	}
}

// The estimator's passes keep a length only where every pass admitted it
// (PrefillCost.At): what is left keeps its costs, and fewer than two
// lengths is no cost at all.
func TestAtKeepsTheLengthsGiven(t *testing.T) {
	c := PrefillCost{Tokens: []float64{1024, 8192, 65536, 98304}, PerToken: []float64{14e-6, 15e-6, 61e-6, 73e-6}}
	for _, tc := range []struct {
		name   string
		tokens []float64
		want   PrefillCost
	}{
		{"all of them", c.Tokens, c},
		{"a length that came only in a later pass is left out", []float64{1024, 8192, 65536}, PrefillCost{Tokens: []float64{1024, 8192, 65536}, PerToken: []float64{14e-6, 15e-6, 61e-6}}},
		{"lengths the cost has not are not made up", []float64{1024, 32768, 98304}, PrefillCost{Tokens: []float64{1024, 98304}, PerToken: []float64{14e-6, 73e-6}}},
		{"one length left: no cost", []float64{8192}, PrefillCost{}},
		{"none", nil, PrefillCost{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.At(tc.tokens)
			if !slices.Equal(got.Tokens, tc.want.Tokens) || !slices.Equal(got.PerToken, tc.want.PerToken) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Three readings of the cost, each read with the one before, are taken on
// to what they close on: a gap closed by the same share each pass to its
// limit, a swing to its middle; readings that do not close stay as read.
func TestExtrapolateTakesTheReadingsToWhatTheyCloseOn(t *testing.T) {
	at := func(v ...float64) PrefillCost { return PrefillCost{Tokens: []float64{8192, 32768}, PerToken: v} }
	for _, tc := range []struct {
		name    string
		a, b, c PrefillCost
		want    PrefillCost
	}{
		// 40 -> 30 -> 25: half the gap each pass, to 20.
		{"a quarter of the gap left after two passes", at(15, 40), at(15, 30), at(15, 25), at(15, 20)},
		{"a swing about its middle", at(16, 40.2), at(14, 38.6), at(16, 40.2), at(15, 39.4)},
		{"gaps that grow stay as read", at(15, 20), at(15, 22), at(15, 26), at(15, 26)},
		{"a limit below zero is no cost", at(15, 20), at(15, 10), at(15, 1), at(15, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Extrapolate(tc.a, tc.b, tc.c)
			for i := range got.PerToken {
				if !slices.Equal(got.Tokens, tc.want.Tokens) || math.Abs(got.PerToken[i]-tc.want.PerToken[i]) > 1e-9 {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

func TestWeighCountsProductionsPromptsByTheirCost(t *testing.T) {
	// 15 µs a token at 8K, 61 µs at 64K: a 64K prompt costs 32 of the 8K
	// ones, not 8.
	cost := PrefillCost{Tokens: []float64{8192, 65536}, PerToken: []float64{15e-6, 61e-6}}
	m := 61.0 / 15
	for _, c := range []struct {
		name      string
		cost      PrefillCost
		prompt    float64
		p         Point
		level     float64 // the lone probe's Level, or the burst's Load
		wantLevel float64
	}{
		{"a lone probe behind a longer prompt", cost, 8192, Point{Level: 1 + 7.95, Queued: 65536}, 0, 1 + 7.95*m},
		{"a burst's production ahead", cost, 8192, Point{Burst: 4, Load: 4 + 2*8, Queued: 65536}, 0, 4 + 2*8*m},
		{"a burst with none ahead", cost, 8192, Point{Burst: 4, Load: 4, Queued: 65536}, 0, 4},
		{"a shorter prompt ahead of a long probe", cost, 65536, Point{Level: 1 + 0.125, Queued: 8192}, 0, 1 + 0.125/m},
		{"between two lengths on the line", cost, 8192, Point{Level: 2, Queued: 36864}, 0, 1 + 38e-6/15e-6},
		{"past the longest at its cost", cost, 8192, Point{Level: 2, Queued: 131072}, 0, 1 + m},
		{"production's prompt not known", cost, 8192, Point{Level: 3}, 0, 3},
		{"no cost known", PrefillCost{}, 8192, Point{Level: 3, Queued: 65536}, 0, 3},
		// A cost per token that falls with the length (a fixed part per
		// prompt in the engine, or intercepts read off) is held to the
		// tokens' share: a prefill grows at least as its prompt.
		{"no less than the tokens", PrefillCost{Tokens: []float64{8192, 65536}, PerToken: []float64{61e-6, 15e-6}}, 8192, Point{Level: 2, Queued: 65536}, 0, 2},
		// And at most as its square: twice the tokens cost at most four times.
		{"no more than the square", PrefillCost{Tokens: []float64{8192, 16384}, PerToken: []float64{1e-6, 5e-6}}, 8192, Point{Level: 3, Queued: 16384}, 0, 1 + 2*2},
		{"a bench cell as it is", cost, 8192, Point{Cell: 1, Burst: 4, Load: 12, Queued: 65536}, 0, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.cost.weigh([]Point{c.p}, c.prompt)[0]
			level := got.Level
			if c.p.Burst > 1 {
				level = got.Load
			}
			if math.Abs(level-c.wantLevel) > 1e-9 {
				t.Errorf("level %v, want %v", level, c.wantLevel)
			}
		})
	}
}

func TestWeighLeavesTheWindowAlone(t *testing.T) {
	cost := PrefillCost{Tokens: []float64{8192, 65536}, PerToken: []float64{15e-6, 61e-6}}
	points := []Point{{Level: 9, Queued: 65536}}
	if got := cost.weigh(points, 8192); got[0].Level == points[0].Level || points[0].Level != 9 {
		t.Fatalf("weighed %v, the window's point now %v: want a weighed copy", got[0].Level, points[0].Level)
	}
}

// A use case none of whose points a cost can move reads the same from them
// at every cost (the estimator reads its slopes once, not every pass).
func TestWeighsWhereACostMovesThePoints(t *testing.T) {
	costs := []PrefillCost{
		{Tokens: []float64{8192, 65536}, PerToken: []float64{15e-6, 61e-6}},
		{Tokens: []float64{8192, 65536}, PerToken: []float64{61e-6, 15e-6}},
		{Tokens: []float64{1024, 98304}, PerToken: []float64{1e-6, 90e-6}},
	}
	for _, c := range []struct {
		name   string
		u      UseCase
		p      Point
		weighs bool
	}{
		{"a lone probe behind production's prompts", UseCase{InputTokens: 8192}, Point{Level: 3, Queued: 65536}, true},
		{"a burst with production ahead", UseCase{InputTokens: 8192}, Point{Burst: 4, Load: 6, Queued: 1024}, true},
		{"a lone probe that met no prefill", UseCase{InputTokens: 8192}, Point{Level: 1, Queued: 65536}, false},
		{"a burst with none ahead", UseCase{InputTokens: 8192}, Point{Burst: 4, Load: 4, Queued: 65536}, false},
		{"production's prompt not known (an idle target)", UseCase{InputTokens: 8192}, Point{Level: 3}, false},
		{"a bench cell", UseCase{InputTokens: 8192}, Point{Cell: 1, Burst: 4, Load: 12, Queued: 65536}, false},
		{"an engine reading", UseCase{InputTokens: 8192}, Point{Engine: true, Level: 3, Queued: 65536}, false},
		{"a warm prefix", UseCase{InputTokens: 8192, Warm: true}, Point{Level: 3, Queued: 65536}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			points := []Point{c.p}
			if got := c.u.Weighs(points); got != c.weighs {
				t.Fatalf("Weighs = %v, want %v", got, c.weighs)
			}
			moved := false
			for _, cost := range costs {
				u := c.u
				u.Cost = cost
				if got := u.weighed(points)[0]; got.Level != c.p.Level || got.Load != c.p.Load {
					moved = true
				}
			}
			if !c.weighs && moved {
				t.Errorf("a cost moved a point Weighs says none moves")
			}
			if c.weighs && !moved {
				t.Errorf("no cost moved a point Weighs says one moves")
			}
		})
	}
}
