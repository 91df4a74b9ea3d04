package capacity

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// linear makes points whose TTFT and ITL grow linearly with load, with noise
// and a few wild outliers.
func linear(n int, seed uint64, ttft0, ttftSlope, itl0, itlSlope float64) []Point {
	r := rand.New(rand.NewPCG(seed, 1))
	var ps []Point
	for i := range n {
		load := float64(1 + i%10)
		noise := 1 + 0.03*r.NormFloat64()
		itl := (itl0 + itlSlope*load) * noise
		p := Point{Time: t0.Add(time.Duration(i) * time.Minute), Load: load, TTFT: (ttft0 + ttftSlope*load) * noise, ITL: itl, Decode: 1 / itl}
		if i%17 == 5 {
			p.TTFT *= 8 // a stalled probe
		}
		ps = append(ps, p)
	}
	return ps
}

func TestCapacityRecoversLinearResponse(t *testing.T) {
	tests := []struct {
		name string
		u    UseCase
		want float64
	}{
		{"ttft binds", UseCase{Name: "c", Statistic: "p50", TTFTMax: 0.5 + 0.8*6.5, DecodeMin: 10}, 6.5},
		{"decode binds", UseCase{Name: "c", Statistic: "p50", TTFTMax: 60, DecodeMin: 1 / (0.01 + 0.004*4.25)}, 4.25},
		{"beyond observed, within reach", UseCase{Name: "c", Statistic: "p50", TTFTMax: 0.5 + 0.8*14}, 14},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := Evaluate("a", tc.u, linear(200, 1, 0.5, 0.8, 0.01, 0.004), 3)
			if math.Abs(e.Capacity-tc.want) > 0.3 {
				t.Fatalf("capacity %.2f, want %.2f ± 0.3 (%s)", e.Capacity, tc.want, e.Why)
			}
			if math.Abs(e.Free-(e.Capacity-3)) > 1e-9 || math.Abs(e.Ratio-(1-3/e.Capacity)) > 1e-9 {
				t.Errorf("free %.2f ratio %.2f inconsistent with capacity %.2f at load 3", e.Free, e.Ratio, e.Capacity)
			}
		})
	}
}

func TestCapacityUnknownWithoutData(t *testing.T) {
	u := UseCase{Name: "c", Statistic: "mean", TTFTMax: 5}
	few := linear(6, 2, 0.5, 0.8, 0.01, 0.004)[1:] // none at an idle load: no burst of one
	if e := Evaluate("a", u, few, 2); !math.IsNaN(e.Capacity) || e.Why == "" {
		t.Errorf("with %d samples: capacity %v, why %q", len(few), e.Capacity, e.Why)
	}
	// How far from a steady estimate counts lone probes, as its why does:
	// a burst's probes bring it no nearer.
	burst := []Point{{Time: t0, Load: 3, InFlight: 3, TTFT: 1, Burst: 3}, {Time: t0, Load: 3, InFlight: 3, TTFT: 1.2, Burst: 3}}
	if e := Evaluate("a", u, append(burst, few...), 2); e.Samples != len(few) || e.SamplesNeeded != MinSamples ||
		!strings.Contains(e.Why, fmt.Sprintf("%d samples in the window, %d needed", len(few), MinSamples)) {
		t.Errorf("with %d lone probes and a burst: samples %d of %d, why %q", len(few), e.Samples, e.SamplesNeeded, e.Why)
	}
	flat := linear(100, 3, 0.5, 0.8, 0.01, 0.004)
	for i := range flat {
		flat[i].Load = 4
	}
	if e := Evaluate("a", u, flat, 4); !math.IsNaN(e.Capacity) || e.Why == "" {
		t.Errorf("without load spread: capacity %v, why %q", e.Capacity, e.Why)
	}
	if e := Evaluate("a", UseCase{Name: "c", TTFTMax: 1000}, linear(100, 4, 0.5, 0.8, 0.01, 0.004), 2); !math.IsNaN(e.Capacity) {
		t.Errorf("a threshold far beyond reach must not be extrapolated to: %v", e.Capacity)
	}
}

// TestOneLevelIsABound: a lone probe that met no other prefill is a burst
// of one; alone, its TTFT taken as proportional to the level is a bound
// that stands until a burst at another level measures the curve.
func TestOneLevelIsABound(t *testing.T) {
	idle := Point{Time: t0, Load: 1.2, InFlight: 1.2, Level: 1, TTFT: 4, E2E: 4.5, ITL: 0.016, Decode: 62.5}
	busy := Point{Time: t0.Add(time.Minute), Load: 3, InFlight: 3, Level: 2.5, TTFT: 9, E2E: 9.5, ITL: 0.016, Decode: 62.5}
	burst := func(n int, ttft float64) []Point {
		ps := make([]Point, n)
		for i := range ps {
			ps[i] = Point{Time: t0.Add(2 * time.Minute), Load: float64(n), InFlight: float64(n), Burst: n, TTFT: ttft, E2E: ttft + 0.5, ITL: 0.016, Decode: 62.5}
		}
		return ps
	}
	tests := []struct {
		name     string
		points   []Point
		overhead float64 // UseCase.Overhead
		want     float64 // NaN: none
		oneLevel bool
	}{
		// Alone, it stands as the last of 2.5 sent together: 12 s at 3.6 s a prompt.
		{"lone probe at another's prefill", []Point{busy}, 0, 12 / 3.6, true},
		{"idle probe: 12 s at 4 s a prompt", []Point{idle, busy}, 0, 3, true},
		// n prefills, one overhead: 1 + 3n reaches 12 at 11/3.
		{"idle probe, 1 s of it overhead", []Point{idle, busy}, 1, 11.0 / 3, true},
		{"lone probe at another's prefill, with overhead", []Point{busy}, 1, 2.5 * 11 / 8, true},
		{"an overhead past the knot's TTFT is not this curve's", []Point{idle, busy}, 5, 3, true},
		// Past Reach times the most requests the server held (3), nothing.
		{"idle probe, bound past reach", []Point{{Time: t0, Load: 1, InFlight: 1, Level: 1, TTFT: 1, E2E: 1.5, ITL: 0.016, Decode: 62.5}}, 0, math.NaN(), false},
		// Prefills side by side at 2: (6-4)/(2-1) s a request, 12 s at 5,
		// whatever the overhead: two levels give the slope.
		{"a burst of two beside it", append([]Point{idle}, burst(2, 6)...), 0, 5, false},
		{"a burst of two beside it, with overhead", append([]Point{idle}, burst(2, 6)...), 1, 5, false},
		// Levels 1 and 5, 5x apart: TTFT's crossing on the line between
		// them, 1 + 4(12-4)/(20-4) = 3, not the log-load split's 5^0.5.
		{"a burst of five beside it: the line across the gap", append([]Point{idle}, burst(5, 20)...), 0, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := UseCase{Name: "c", Statistic: "mean", TTFTMax: 12, Overhead: tc.overhead}
			e := Evaluate("a", u, tc.points, 1)
			if math.IsNaN(tc.want) != math.IsNaN(e.Capacity) || math.Abs(e.Capacity-tc.want) > 1e-9 || e.OneLevel != tc.oneLevel {
				t.Errorf("capacity %v one level %v, want %v %v (%s)", e.Capacity, e.OneLevel, tc.want, tc.oneLevel, e.Why)
			}
		})
	}
}

func TestOverhead(t *testing.T) {
	idle := func(ttft float64) Point { return Point{Time: t0, Load: 1, Level: 1, TTFT: ttft} }
	met := idle(0.2)
	met.Level = 2 // met another prefill
	burst := idle(0.2)
	burst.Burst = 3
	after := idle(0.2)
	after.Aftermath = true
	tests := []struct {
		name     string
		byPrompt map[int][]Point
		want     float64
	}{
		// Report 000's simulator: 0.3624 s at 1K, 0.5772 s at 8K.
		{"two lengths: their line at zero", map[int][]Point{1024: {idle(0.3624)}, 8192: {idle(0.5772)}}, 0.3624 - 1024*(0.5772-0.3624)/7168},
		{"the quickest at each length", map[int][]Point{1024: {idle(0.5), idle(0.3624)}, 8192: {idle(0.5772), idle(0.9)}}, 0.3624 - 1024*(0.5772-0.3624)/7168},
		{"the two shortest", map[int][]Point{1024: {idle(0.3624)}, 8192: {idle(0.5772)}, 65536: {idle(3)}}, 0.3624 - 1024*(0.5772-0.3624)/7168},
		{"only probes that met no other prefill", map[int][]Point{1024: {idle(0.3624), met, burst, after}, 8192: {idle(0.5772)}}, 0.3624 - 1024*(0.5772-0.3624)/7168},
		{"one length", map[int][]Point{1024: {idle(0.3624)}}, 0},
		{"the longer not slower", map[int][]Point{1024: {idle(0.6)}, 8192: {idle(0.5772)}}, 0},
		{"below zero", map[int][]Point{1024: {idle(0.1)}, 8192: {idle(1)}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overhead(tc.byPrompt); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Overhead = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMarginAndHeadroomMoveWithLoad(t *testing.T) {
	u := UseCase{Name: "c", Statistic: "mean", TTFTMax: 0.5 + 0.8*6.5}
	ps := linear(200, 5, 0.5, 0.8, 0.01, 0.004)
	prev := Evaluate("a", u, ps, 1)
	for _, load := range []float64{2, 4, 6, 8} {
		e := Evaluate("a", u, ps, load)
		if !(e.Ratio < prev.Ratio && e.Free < prev.Free) {
			t.Errorf("load %v: ratio %.3f free %.2f, want both below %.3f %.2f", load, e.Ratio, e.Free, prev.Ratio, prev.Free)
		}
		prev = e
	}
	if prev.Ratio >= 0 || prev.Free >= 0 {
		t.Errorf("above capacity, ratio %.2f and free %.2f must be negative", prev.Ratio, prev.Free)
	}
	// Every probe too slow: the margin is negative.
	slow := Evaluate("a", UseCase{Name: "c", Statistic: "p90", TTFTMax: 0.4, DecodeMin: 10}, ps, 1)
	if !(slow.Margin < 0) || slow.SLOs[0].Margin >= 0 {
		t.Errorf("breached SLO: margin %v", slow.Margin)
	}
}

// Lone probes and bursts make two curves: the steady one from lone probes at
// production's loads, the burst one from requests sent together; the
// capacity is the lower, and the margin is the lone probes' alone.
func TestSteadyAndBurstCurves(t *testing.T) {
	var ps []Point
	for i := range 10 {
		load := float64(2 + i%5)
		ps = append(ps, Point{Time: t0.Add(time.Duration(i) * time.Minute), Load: load, TTFT: 0.1 * load, Decode: 100})
	}
	// Bursts of 3 and 6: TTFTs queue one behind the other (mean 0.2 s x n);
	// each probe but the last admitted decoded between later prefills.
	for _, n := range []int{3, 6} {
		at := t0.Add(time.Duration(n) * time.Hour)
		for k := 1; k <= n; k++ {
			decode := 5.0
			if k == n {
				decode = 50
			}
			ps = append(ps, Point{Time: at, Load: float64(n), InFlight: float64(n), TTFT: 0.4 * float64(k*n) / float64(n+1), Decode: decode, Burst: n})
		}
	}
	u := UseCase{Name: "c", Statistic: "mean", TTFTMax: 1, DecodeMin: 20}
	e := Evaluate("a", u, ps, 4)
	// Steady: TTFT 0.1 x load reaches 1 s at 10, within twice the highest load (6).
	if math.Abs(e.SteadyCapacity-10) > 1e-6 {
		t.Errorf("steady capacity %.2f, want 10 (%s)", e.SteadyCapacity, e.SLOs[0].Why)
	}
	// Burst: mean TTFT 0.6 at 3 and 1.2 at 6 cross 1 s at 5. Decode: the last
	// admitted probes' 50 tok/s hold; the others' 5 tok/s would not.
	if math.Abs(e.BurstCapacity-5) > 1e-6 || !math.IsInf(e.SLOs[1].BurstCapacity, 1) {
		t.Errorf("burst capacity %.2f (decode %.2f), want 5 (decode not reached)", e.BurstCapacity, e.SLOs[1].BurstCapacity)
	}
	if e.Capacity != e.BurstCapacity || math.Abs(e.Free-1) > 1e-6 {
		t.Errorf("capacity %.2f free %.2f, want the lower curve's 5 and 1 free at load 4", e.Capacity, e.Free)
	}
	if math.Abs(e.SLOs[0].Value-0.4) > 1e-9 || math.Abs(e.Margin-0.6) > 1e-9 {
		t.Errorf("TTFT %.3f margin %.3f, want the lone probes' 0.4 and 0.6", e.SLOs[0].Value, e.Margin)
	}
	// Without the bursts the steady curve alone carries the estimate.
	if e := Evaluate("a", u, ps[:10], 4); e.Capacity != e.SteadyCapacity || !math.IsNaN(e.BurstCapacity) {
		t.Errorf("lone probes only: capacity %.2f steady %.2f burst %.2f", e.Capacity, e.SteadyCapacity, e.BurstCapacity)
	}
}

// A lone probe that met no other prefill is a burst of one at its prefill
// level, whatever was decoding beside it, unless it took more than 1.5
// times the quickest such probe; without a level, one that ran at up to
// 1.5 requests in flight is. Where no point is either (nor a burst),
// lone probes stand at their levels, as the last of that many sent together,
// unless one took more than 1.5 times the quickest TTFT per level.
func TestSplitBurstsOfOne(t *testing.T) {
	idle := Point{Load: 1, InFlight: 1, Level: 1}
	tests := []struct {
		name     string
		ps       []Point
		together []float64 // the loads of the burst curve's points
	}{
		{"no other prefill amid decoders", []Point{{Load: 11, InFlight: 11, Level: 1.04}}, []float64{1.04}},
		{"queued behind a prompt, beside an idle probe", []Point{{Load: 3, InFlight: 3, Level: 2.2}, idle}, []float64{1}},
		{"queued behind a prompt, nothing else", []Point{{Load: 3, InFlight: 3, Level: 2.2}}, []float64{2.2}},
		{"no level, idle", []Point{{Load: 1.2, InFlight: 1.2}}, []float64{1.2}},
		{"no level, busy", []Point{{Load: 1.7, InFlight: 1.7}}, nil},
		{"level unreadable", []Point{{Load: 1.2, InFlight: 1.2, Level: math.NaN()}}, []float64{1.2}},
		{"a burst keeps its own", []Point{{Load: 6.5, InFlight: 9, Burst: 6}, {Load: 3, InFlight: 3, Level: 2.2}}, []float64{6.5}},
		// Waited for KV-cache space: no prefill its level counts, five
		// times one alone's TTFT.
		{"waited for what its level does not count", []Point{{Load: 1, InFlight: 2, Level: 1, TTFT: 3}, {Load: 11, InFlight: 11, Level: 1.24, TTFT: 15.9}}, []float64{1}},
		{"within 1.5 times the quickest", []Point{{Load: 1, InFlight: 2, Level: 1, TTFT: 3}, {Load: 5, InFlight: 5, Level: 1.3, TTFT: 4.4}}, []float64{1, 1.3}},
		// Report 000's simulator at 64K under eleven users, no idle moment.
		{"nothing else, waited for what its level does not count", []Point{{Load: 2, InFlight: 2, Level: 1.54, TTFT: 3.64}, {Load: 11, InFlight: 11, Level: 1.66, TTFT: 17}}, []float64{1.54}},
		{"nothing else, within 1.5 times the quickest per level", []Point{{Load: 2, InFlight: 2, Level: 1.93, TTFT: 7.94}, {Load: 6, InFlight: 6, Level: 3.9, TTFT: 16}}, []float64{1.93, 3.9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lone, together := split(tc.ps)
			alone := 0
			for _, p := range tc.ps {
				if p.Burst == 0 {
					alone++
				}
			}
			if len(lone) != alone {
				t.Errorf("lone: %v, want %d", lone, alone)
			}
			var loads []float64
			for _, g := range together {
				loads = append(loads, g.Load)
				if g.Burst < 1 {
					t.Errorf("on the burst curve as %+v: not a burst", g)
				}
			}
			if !slices.Equal(loads, tc.together) {
				t.Errorf("burst curve at loads %v, want %v", loads, tc.together)
			}
		})
	}
}

// A burst's TTFT answers to the prefill it competed with (Load), its decode
// speed to the batch it decoded in (InFlight), and its E2E to both: the E2E
// curve adds the two fits. Here four production requests were running
// through every burst.
func TestBurstMetricsAnswerToTheirOwnLoads(t *testing.T) {
	ps := []Point{{Time: t0, Load: 1, InFlight: 1, TTFT: 0.1, E2E: 0.15, Decode: 100}}
	for _, n := range []int{3, 6, 9} {
		level, running := float64(n), float64(n+4)
		for range n {
			ps = append(ps, Point{Time: t0.Add(time.Duration(n) * time.Hour), Load: level, InFlight: running,
				TTFT: 0.1 * level, E2E: 0.1*level + 0.05*running, Decode: 100 / running, Burst: n})
		}
	}
	e := Evaluate("a", UseCase{Name: "c", Statistic: "mean", TTFTMax: 0.5, E2EMax: 1.5, DecodeMin: 10}, ps, 1)
	for i, want := range []float64{
		5,  // TTFT 0.1 x level: 0.3 at 3 and 0.6 at 6 cross 0.5 at 5
		10, // E2E 0.1 s per level and 0.05 per request in flight: 1.5 s at 10 (whole at either load: 8.7 or 12.7)
		10, // decode 100 / in flight: 10 tok/s at 10 in flight, the burst of 6
	} {
		if got := e.SLOs[i].BurstCapacity; math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: burst capacity %.3f, want %v (curve %v)", e.SLOs[i].Name, got, want, e.SLOs[i].BurstCurve)
		}
	}
}

// A threshold that holds as far as its curve can be followed caps the
// capacity at that reach: beyond it nothing is known of it. Here decode was
// measured at up to 30 in flight (reach 60) and stayed within; TTFT at
// levels up to 10, whose line is followed as far as it goes (burstReach).
func TestOpenThresholdCapsAtItsReach(t *testing.T) {
	ps := []Point{{Time: t0, Load: 1, InFlight: 1, TTFT: 0.01, Decode: 88}}
	for _, level := range []float64{3, 6, 10} {
		running := level + 20
		ps = append(ps, Point{Time: t0.Add(time.Duration(level) * time.Hour), Load: level, InFlight: running,
			TTFT: 0.01 * level, Decode: 50 - running, Burst: int(level)})
	}
	e := Evaluate("a", UseCase{Name: "c", Statistic: "mean", TTFTMax: 1, DecodeMin: 10}, ps, 1)
	// TTFT 0.01 x level reaches 1 s at 100.
	if ttft := e.SLOs[0].BurstCapacity; math.Abs(ttft-100) > 1e-9 {
		t.Fatalf("TTFT burst capacity %v, want 100 (its line, followed past 10 levels)", ttft)
	}
	held := []Point{{Time: t0, Load: 1, InFlight: 1, TTFT: 0.01, Decode: 88}}
	for _, level := range []float64{3, 6, 10} {
		held = append(held, Point{Time: t0.Add(time.Duration(level) * time.Hour), Load: level, InFlight: level + 20,
			TTFT: 0.01 * level, Decode: 80, Burst: int(level)})
	}
	e = Evaluate("a", UseCase{Name: "c", Statistic: "mean", TTFTMax: 1, DecodeMin: 10}, held, 1)
	if !math.IsInf(e.SLOs[1].BurstCapacity, 1) || e.BurstCapacity != 60 {
		t.Errorf("decode held to 30 in flight: its capacity %v, the burst capacity %v; want +Inf and its reach, 60", e.SLOs[1].BurstCapacity, e.BurstCapacity)
	}
}

// Where production's loads leave a wide gap around a steady crossing, the
// bursts that were measured inside it place the capacity; outside it, or
// across a narrow gap, the lower estimate holds.
func TestSteadyGapPlacedByBursts(t *testing.T) {
	steady := func(low float64) []Point {
		ps := []Point{{Time: t0, Load: 1, InFlight: 1, TTFT: 0.3}}
		for i := range 4 {
			ps = append(ps, Point{Time: t0.Add(time.Duration(i) * time.Minute), Load: low, InFlight: low, TTFT: 0.5},
				Point{Time: t0.Add(time.Duration(i) * time.Hour), Load: 19, InFlight: 19, TTFT: 2})
		}
		return ps
	}
	bursts := func(ps []Point, ttfts ...float64) []Point {
		for i, level := range []float64{5, 10, 20} {
			ps = append(ps, Point{Time: t0.Add(time.Duration(level) * time.Second), Load: level, InFlight: level, TTFT: ttfts[i], Burst: int(level)})
		}
		return ps
	}
	u := UseCase{Name: "c", Statistic: "mean", TTFTMax: 1}
	for _, tc := range []struct {
		name           string
		points         []Point
		steady, capaci float64
	}{
		// 0.5 at 2 and 2 at 19: a third of the way in log load, 2 x 9.5^(1/3).
		{"bursts cross inside the gap", bursts(steady(2), 0.6, 0.8, 1.2), 4.24, 15},
		{"bursts cross past the gap", bursts(steady(2), 0.5, 0.6, 0.9), 4.24, 4.24},
		{"a narrow gap", bursts(steady(10), 0.6, 0.8, 1.2), 13, 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Evaluate("a", u, tc.points, 1)
			if math.Abs(e.SteadyCapacity-tc.steady) > 0.01 || math.Abs(e.Capacity-tc.capaci) > 0.01 {
				t.Errorf("steady %.2f capacity %.2f (burst %.2f), want %.2f and %.2f", e.SteadyCapacity, e.Capacity, e.BurstCapacity, tc.steady, tc.capaci)
			}
		})
	}
}

func TestIsotonicPoolsDips(t *testing.T) {
	c := isotonic(Curve{{1, 1, 1}, {2, 3, 1}, {3, 2, 1}, {4, 5, 2}}, true)
	want := []float64{1, 2.5, 2.5, 5}
	for i, k := range c {
		if math.Abs(k.Value-want[i]) > 1e-12 {
			t.Fatalf("isotonic = %v, want values %v", c, want)
		}
	}
	d := isotonic(Curve{{1, 9, 1}, {2, 10, 1}, {3, 4, 1}}, false)
	if d[0].Value != 9.5 || d[1].Value != 9.5 || d[2].Value != 4 {
		t.Fatalf("decreasing isotonic = %v", d)
	}
}

func TestCrossingBetweenKnots(t *testing.T) {
	for _, tc := range []struct {
		name   string
		curve  Curve
		limit  float64
		want   float64
		convex bool
	}{
		{"linear within Reach", Curve{{10, 1, 1}, {15, 2, 1}}, 1.5, 12.5, false},
		// Halfway in value across a gap of 4x is halfway in log load: 20, not 25.
		{"log load across a wider gap", Curve{{10, 1, 1}, {40, 2, 1}}, 1.5, 20, false},
		{"decreasing across a gap", Curve{{10, 100, 1}, {40, 20, 1}}, 60, 20, false},
		// A convex curve lies below the line between two knots, so the
		// line's crossing is the earlier one: across any gap.
		{"convex across a gap", Curve{{10, 1, 1}, {40, 2, 1}}, 1.5, 25, true},
	} {
		increasing := tc.curve[1].Value > tc.curve[0].Value
		if got, ok := tc.curve.crossing(tc.limit, increasing, tc.convex, Reach); !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: crossing = %v (ok %v), want %v", tc.name, got, ok, tc.want)
		}
	}
}

func TestStatistic(t *testing.T) {
	vs := []float64{5, 1, 4, 2, 3}
	for stat, want := range map[string]float64{"mean": 3, "p50": 3, "p90": 4.6, "p99": 4.96} {
		if got := Statistic(vs, stat); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", stat, got, want)
		}
	}
}

func TestStoreIsBounded(t *testing.T) {
	s := NewStore()
	for i := range 3 * MaxPoints {
		s.Add("a", "s", Point{Time: t0.Add(time.Duration(i) * time.Second), Load: 1})
	}
	w := s.Window("a", "s", t0)
	if len(w) != MaxPoints || !w[0].Time.Equal(t0.Add(2*MaxPoints*time.Second)) {
		t.Fatalf("kept %d points from %v", len(w), w[0].Time)
	}
	if n := len(s.Window("a", "s", t0.Add(time.Duration(3*MaxPoints-10)*time.Second))); n != 10 {
		t.Errorf("window of the last 10 s has %d points", n)
	}
	s.Forget("a")
	if s.Window("a", "s", t0) != nil {
		t.Error("Forget kept the series")
	}
}

// BenchmarkEvaluate is one evaluation of 100 targets x 5 use cases, each with
// a 30-minute window of 120 probes.
func BenchmarkEvaluate(b *testing.B) {
	ps := linear(120, 1, 0.5, 0.8, 0.01, 0.004)
	u := UseCase{Name: "c", Statistic: "p90", TTFTMax: 5, DecodeMin: 15}
	for b.Loop() {
		for range 100 * 5 {
			Evaluate("a", u, ps, 3)
		}
	}
}

func TestBurst(t *testing.T) {
	lone := func(loads ...float64) []Point {
		ps := make([]Point, len(loads))
		for i, l := range loads {
			ps[i] = Point{Time: t0, Load: l, TTFT: 0.1}
		}
		return ps
	}
	slowLone := func(ttft float64, loads ...float64) []Point {
		ps := lone(loads...)
		for i := range ps {
			ps[i].TTFT = ttft
		}
		return ps
	}
	// burst adds n probes of a burst that held every position of its level
	// (none of them failed, or none ahead of them), whose mean TTFT is ttft
	// against the 1 s threshold below: its margin is 1-ttft.
	burst := func(ps []Point, level float64, n int, ttft float64) []Point {
		for range n {
			ps = append(ps, Point{Time: t0.Add(time.Duration(level) * time.Second), Load: level, InFlight: level, TTFT: ttft, Burst: int(level)})
		}
		return ps
	}
	tests := []struct {
		name           string
		points         []Point
		load, queued   float64
		maxBurst, want int
	}{
		{"no probe yet", nil, 1, 0, 8, 0},
		{"first burst: production's highest load", lone(2, 2, 6, 6, 6), 1, 0, 8, 6},
		// From one level: where n times one request's TTFT (0.1 s) reaches 1 s.
		{"first burst: n times one request's TTFT", lone(1, 1, 1), 0, 0, 16, 10},
		{"first burst: MinBurstSpread past the idle probe", slowLone(0.45, 1.2, 1.2, 1.2), 1, 0, 8, 3},
		{"queued requests arrive with it", lone(2, 2, 6, 6, 6), 2, 2, 8, 4},
		{"at most maxBurst", lone(2, 20, 20), 1, 0, 8, 8},
		{"at least two", lone(3, 3, 3), 3, 2, 8, 2},
		{"one passing level: twice it", burst(lone(1, 1, 1), 5, 4, 0.5), 1, 0, 16, 10},
		{"extrapolates the margin's fall", burst(lone(1, 1, 1), 6, 5, 0.6), 1, 0, 16, 10},
		{"past twice the level where the margin says so", burst(lone(1, 1, 1), 4, 3, 0.4), 1, 0, 16, 10},
		{"margin not falling: twice the level", burst(lone(1, 1, 1), 4, 3, 0.1), 1, 0, 16, 8},
		{"margin falling by a hair: maxBurst", burst(lone(1, 1, 1), 4, 3, 0.1+1e-15), 1, 0, 16, 16},
		{"aims between pass and fail", burst(burst(lone(1, 1, 1), 4, 3, 0.5), 12, 11, 1.5), 1, 0, 16, 8},
		{"bracketed closely enough", burst(burst(lone(1, 1, 1), 8, 7, 0.9), 10, 9, 1.1), 1, 0, 16, 0},
		{"largest allowed burst measured", burst(lone(1, 1, 1), 8, 8, 0.5), 1, 0, 8, 0},
		{"fails at the lowest level: halves it", burst(lone(2, 2, 2), 8, 8, 2), 2, 0, 8, 4},
		{"fails at two requests", burst(lone(2, 2, 2), 3, 3, 2), 2, 0, 8, 0},
		{"busier than the median", lone(1, 1, 1, 4, 4), 3, 0, 8, 0},
		{"load unknown", lone(1, 1, 1), math.NaN(), 0, 8, 0},
	}
	u := UseCase{Name: "c", Statistic: "mean", TTFTMax: 1}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Burst(Evaluate("a", u, tc.points, tc.load), tc.load, tc.queued, tc.maxBurst); got != tc.want {
				t.Errorf("Burst = %d, want %d", got, tc.want)
			}
		})
	}
	// n prefills and one overhead (0.05 s of the 0.1): 0.05 + 0.05n
	// reaches 1 s at 19.
	over := UseCase{Name: "c", Statistic: "mean", TTFTMax: 1, Overhead: 0.05}
	if got := Burst(Evaluate("a", over, lone(1, 1, 1), 0), 0, 0, 32); got != 19 {
		t.Errorf("first burst with overhead = %d, want 19", got)
	}
	// Decode speed answers to every request in flight, production's
	// included: with 4 running, a batch of 10 is a burst of 6.
	decode := UseCase{Name: "d", Statistic: "mean", TTFTMax: 1, DecodeMin: 10}
	withDecode := func(loads ...float64) []Point {
		ps := lone(loads...)
		for i := range ps {
			ps[i].InFlight, ps[i].Decode = ps[i].Load, 100
		}
		return ps
	}
	// TTFT's margins are 0.9 at level 1 and 0.8 at level 5 (zero at 37),
	// decode's 9 and 1 at 1 and 9 in flight (zero at 10).
	ps := append(withDecode(1, 4, 4, 4), Point{Time: t0, Load: 5, InFlight: 9, TTFT: 0.2, Decode: 20, Burst: 5})
	for i := range ps {
		ps[i].E2E = 2 * ps[i].TTFT
	}
	for _, tc := range []struct {
		name string
		u    UseCase
		want int
	}{
		{"TTFT alone: the level", u, 37},
		{"decode breaks first: the batch", decode, 6},
		// E2E reaches a load once its TTFT does: 0.2 s at 1, 0.35 s at 5
		// (zero margin at 22).
		{"E2E: its TTFT's level", UseCase{Name: "e", Statistic: "mean", E2EMax: 1}, 22},
	} {
		if got := Burst(Evaluate("a", tc.u, ps, 4), 4, 0, 64); got != tc.want {
			t.Errorf("%s: Burst = %d, want %d", tc.name, got, tc.want)
		}
	}
	// Decode bracketed between 30 and 33 in flight; TTFT's line, followed
	// from level 13, reaches its threshold at 33, past decode's crossing:
	// nothing is left to search.
	bracketed := withDecode(20, 20, 20)
	for _, level := range []float64{3, 6, 10, 13} {
		running, decode := level+20, 15.0
		if level == 13 {
			decode = 8
		}
		bracketed = append(bracketed, Point{Time: t0.Add(time.Duration(level) * time.Hour), Load: level, InFlight: running, TTFT: 0.03 * level, Decode: decode, Burst: int(level)})
	}
	if got := Burst(Evaluate("a", decode, bracketed, 20), 20, 0, 64); got != 0 {
		t.Errorf("decode bracketed, TTFT beyond it: Burst = %d, want 0", got)
	}
	// Decode, measured at 22 in flight, is expected to break just past 22,
	// one request above the 21 running: any burst measures that, so TTFT's
	// aim (margins 0.9 at level 1, 0.7 at 3: zero at 10) chooses the size.
	near := append(withDecode(1, 21, 21, 21), Point{Time: t0, Load: 3, InFlight: 22, TTFT: 0.3, Decode: 11, Burst: 3})
	if got := Burst(Evaluate("a", decode, near, 21), 21, 0, 16); got != 10 {
		t.Errorf("decode about to break: Burst = %d, want TTFT's 10", got)
	}
	// No burst is smaller than two, which spreads the levels by
	// MinBurstSpread past the idle probe's.
	if got := Burst(Evaluate("a", UseCase{Name: "d", Statistic: "mean", DecodeMin: 10}, withDecode(1, 2, 2), 2), 2, 0, 8); got != 2 {
		t.Errorf("first burst with 2 running: %d, want 2", got)
	}
	// An SLO breached now: more load would only hurt.
	slow := lone(1, 1, 1)
	for i := range slow {
		slow[i].TTFT = 2
	}
	if got := Burst(Evaluate("a", u, slow, 1), 1, 0, 8); got != 0 {
		t.Errorf("burst of %d while breached", got)
	}
}

// JSON has no NaN or infinities: an estimate holding them, in any field or
// knot, still encodes, with null where the number is.
func TestEstimateJSONWithNonFiniteValues(t *testing.T) {
	inf := math.Inf(1)
	e := Estimate{Target: "a", Capacity: math.NaN(), Load: inf, Free: math.Inf(-1),
		SLOs:   []SLO{{Name: "ttft_seconds", Threshold: 1, Value: inf, Curve: Curve{{Load: inf, Value: math.NaN(), N: 1}}}},
		Points: []Point{{Load: inf, TTFT: math.NaN()}}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"curve":[{"load":null,"value":null,"samples":1}]`) || !strings.Contains(string(b), `"load":null`) {
		t.Errorf("encoded %s", b)
	}
}

// A breached margin and a capacity above the load now would say "no request
// more fits" and "N more fit" at once (seen on a real server: margin -0.41,
// ratio 0.88). Whenever the margin is breached, the capacity is at most
// the load, and free and ratio are not positive.
func TestBreachedMarginCapsCapacity(t *testing.T) {
	steady := linear(200, 3, 0.2, 0.29, 0.01, 0.001)
	// Three lone probes, too few for a steady curve, all slow; and bursts
	// that give a burst capacity of several requests.
	var mixed []Point
	for i := range 3 {
		mixed = append(mixed, Point{Time: t0.Add(time.Duration(i) * time.Minute), Load: 2, InFlight: 2, TTFT: 3, ITL: 0.02, Decode: 50})
	}
	for n := 1; n <= 8; n++ {
		for range n {
			mixed = append(mixed, Point{Time: t0.Add(time.Duration(10+n) * time.Minute), Load: float64(n), InFlight: float64(n), Burst: max(n, 2),
				TTFT: 0.2 * float64(n), ITL: 0.02, Decode: 50})
		}
	}
	breaches := 0
	for _, data := range []struct {
		name   string
		points []Point
	}{{"steady", steady}, {"few lone probes beside bursts", mixed}} {
		for _, ttft := range []float64{0.8, 1.5, 2.5, 4} {
			for _, stat := range []string{"mean", "p90"} {
				for load := 1.0; load <= 10; load++ {
					e := Evaluate("a", UseCase{Name: "c", Statistic: stat, TTFTMax: ttft}, data.points, load)
					if !(e.Margin < 0) {
						continue
					}
					breaches++
					if e.Capacity > load || e.Free > 0 || e.Ratio > 0 {
						t.Errorf("%s, %s TTFT <= %g at load %g: margin %.2f beside capacity %.2f, free %.2f, ratio %.2f",
							data.name, stat, ttft, load, e.Margin, e.Capacity, e.Free, e.Ratio)
					}
				}
			}
		}
	}
	if breaches < 20 {
		t.Errorf("only %d breached evaluations: the test exercises too little", breaches)
	}
	// The guard's case: the window's statistic breached, a burst capacity above the load.
	if e := Evaluate("a", UseCase{Name: "c", Statistic: "mean", TTFTMax: 1.5}, mixed, 2); e.Capacity != 2 || !strings.Contains(e.Why, "capacity held at the load") {
		t.Errorf("few lone probes, all slow, beside bursts: capacity %.2f (%s), want 2, held at the load", e.Capacity, e.Why)
	}
}

// A bench seed keeps each cell's identity: every request of a closed-loop
// cell decoded amid its full concurrency and counts for decode and ITL, not
// only the one that got its first token last, as of a burst.
func TestSeedCellsKeepEveryRequest(t *testing.T) {
	var seed []Point
	want := map[int]int{} // concurrency -> requests
	for cell, n := range []int{1, 2, 4, 8} {
		for i := range 2 * n {
			itl := 0.01 + 0.004*float64(n) + 0.0001*float64(i)
			seed = append(seed, Point{Load: float64(n), InFlight: float64(n), TTFT: 0.2 * float64(n), ITL: itl, Decode: 1 / itl, Burst: n, Cell: cell + 1})
		}
		want[n] = 2 * n
	}
	e := Seeded("a", UseCase{Name: "c", Statistic: "mean", DecodeMin: 30, ITLMax: 0.05}, nil, seed, 1)
	if e.Seed != len(seed) || math.IsNaN(e.Capacity) {
		t.Fatalf("seeded estimate: %d seed points, capacity %v (%s)", e.Seed, e.Capacity, e.Why)
	}
	for _, s := range e.SLOs {
		used := 0
		for _, k := range s.BurstCurve {
			used += k.N
			if k.N != want[int(k.Load)] {
				t.Errorf("%s: the cell at %g requests counts %d of its %d requests", s.Name, k.Load, k.N, want[int(k.Load)])
			}
		}
		if used != len(seed) {
			t.Errorf("%s: %d of %d seed requests used", s.Name, used, len(seed))
		}
	}
}

// The engine's own decode readings extend a use case's decode curve to
// every batch production ran, scaled to the probes: here the probes decode
// at 1.8x the engine's mean time per token (their longer context), seen at
// 1 and 3 requests in flight, and the engine ran batches of 1 to 40.
func TestEngineDecodeExtendsTheCurve(t *testing.T) {
	engineITL := func(running float64) float64 { return 0.005 * (1 + running/10) }
	r := 0.01 / engineITL(1)
	probe := func(level float64, burst int) Point {
		return Point{Time: t0, Load: level, InFlight: level, TTFT: 0.1 * level, Decode: 1 / (r * engineITL(level)), Burst: burst}
	}
	probes := []Point{probe(1, 1), probe(3, 3), probe(3, 3), probe(3, 3)}
	var eng []Point
	for _, running := range []float64{1, 3, 5, 10, 15, 20, 25, 30, 35, 40} {
		eng = append(eng, Point{Time: t0, Load: running, InFlight: running, TTFT: math.NaN(), E2E: math.NaN(),
			ITL: engineITL(running), Decode: 1 / engineITL(running), Engine: true})
	}
	u := UseCase{Name: "c", Statistic: "mean", DecodeMin: 30}
	// 1/(r x 0.005 x (1 + n/10)) is 30 tok/s at n = 26.7; the curve is
	// linear between the readings at 25 and 30, so a little above.
	with := Evaluate("a", u, append(probes, eng...), 1)
	if got := with.SLOs[0].BurstCapacity; math.Abs(got-26.7) > 0.3 {
		t.Errorf("with the engine's readings: decode burst capacity %.2f, want about 26.7 (curve %v)", got, with.SLOs[0].BurstCurve)
	}
	if with.Samples != 0 || len(with.Points) != len(probes) {
		t.Errorf("samples %d, points %d: the engine's readings are no probes, nor bursts lone probes", with.Samples, len(with.Points))
	}
	// The probes alone reach 3 in flight: followed to twice that at most.
	if got := Evaluate("a", u, probes, 1).BurstCapacity; got > 2*3 {
		t.Errorf("probes alone: burst capacity %.2f, beyond their reach", got)
	}
}

// The ratio of the probes' decode to the engine's is a factor: of two
// probes, one idle at the engine's mean and one that queued and decoded 16
// times slower (the prompts behind it prefilling), the middle is 4, not
// the arithmetic 8.5, which would put the capacity below one request.
func TestDecodeRatioIsGeometric(t *testing.T) {
	engineITL := func(running float64) float64 { return 0.005 * (1 + running/10) }
	idle := Point{Time: t0, Load: 2, InFlight: 2, Level: 1, TTFT: 3, Decode: 1 / engineITL(2)}
	queued := Point{Time: t0, Load: 11, InFlight: 11, Level: 4.6, TTFT: 24, Decode: 1 / (16 * engineITL(11))}
	ps := []Point{idle, queued}
	for _, running := range []float64{1, 3, 5, 10, 15, 20} {
		ps = append(ps, Point{Time: t0, Load: running, InFlight: running, TTFT: math.NaN(), E2E: math.NaN(),
			ITL: engineITL(running), Decode: 1 / engineITL(running), Engine: true})
	}
	// 1/(4 x 0.005 x (1 + n/10)) is 25 tok/s at n = 10.
	e := Evaluate("a", UseCase{Name: "c", Statistic: "mean", DecodeMin: 25}, ps, 1)
	if got := e.SLOs[0].BurstCapacity; math.Abs(got-10) > 0.3 {
		t.Errorf("decode burst capacity %.2f, want about 10 (curve %v)", got, e.SLOs[0].BurstCurve)
	}
}

// E2E of requests sent together is a TTFT then a decode. The decode part
// reaches as far as the engine's readings; the TTFT part, measured to a
// burst of two, follows its trend there, as TTFT's own curve does. Here
// TTFT is 0.1 s a request and the decode of 100 tokens 0.5 x (1 + n/10) s,
// so E2E reaches 2.5 s at 13.3. Before, the sum stopped at 2 and was
// followed to 4 at most: no estimate.
func TestE2EFollowsTTFTsTrend(t *testing.T) {
	itl := func(n float64) float64 { return 0.005 * (1 + n/10) }
	probe := func(n float64, burst int) Point {
		return Point{Time: t0, Load: n, InFlight: n, Level: n, Burst: burst, TTFT: 0.1 * n, E2E: 0.1*n + 100*itl(n), ITL: itl(n), Decode: 1 / itl(n)}
	}
	ps := []Point{probe(1, 0), probe(2, 2), probe(2, 2)}
	for _, n := range []float64{1, 3, 5, 10, 15, 20, 25, 30, 35, 40} {
		ps = append(ps, Point{Time: t0, Load: n, InFlight: n, TTFT: math.NaN(), E2E: math.NaN(), ITL: itl(n), Decode: 1 / itl(n), Engine: true})
	}
	e := Evaluate("a", UseCase{Name: "c", Statistic: "mean", E2EMax: 2.5}, ps, 1)
	if math.Abs(e.BurstCapacity-40.0/3) > 1e-6 {
		t.Fatalf("burst capacity %v, want 13.33 (%s; curve %v)", e.BurstCapacity, e.Why, e.SLOs[0].BurstCurve)
	}
	for _, k := range e.SLOs[0].BurstCurve {
		if k.Load > 2 && k.N != 0 {
			t.Errorf("knot %v past the largest burst counts samples: its TTFT is the trend's", k)
		}
	}
}

// A burst amid production holds the last positions of its level; the cell
// of that level also holds the positions ahead of it, filled in back from
// the burst's first first token at the step between its own first tokens
// (none where the engine prefills a wave side by side), down to one request
// alone at the lowest. A burst that held every position of its level is its
// own cell.
func TestBurstAmidProductionStandsAtTheBack(t *testing.T) {
	idle := Point{Time: t0, Load: 1, InFlight: 1, Level: 1, TTFT: 4.1}
	at := func(level float64, n int, ttfts ...float64) []Point {
		var ps []Point
		for _, v := range ttfts {
			ps = append(ps, Point{Time: t0.Add(time.Minute), Load: level, InFlight: 8, TTFT: v, Burst: n})
		}
		return ps
	}
	tests := []struct {
		name   string
		points []Point
		level  float64
		want   float64
	}{
		// First come, first served: a step of 4.04 s a position. Positions
		// 1.13, 2.27 and 3.4, back from (4.4, 19.45): 6.25, 10.83 and
		// 15.41; with 19.45 and 23.49, 15.09.
		{"two at the back of 5.4", append([]Point{idle}, at(5.4, 2, 19.45, 23.49)...), 5.4, 15.09},
		// Side by side: the burst's first tokens came together, and so
		// would those of the two prompts ahead had they been sent with it.
		// The line from one request alone would put them at 4.1 and 8.05,
		// the cell at 9.63.
		{"three side by side at the back of 5", append([]Point{idle}, at(5, 3, 12, 12, 12)...), 5, 12},
		// A step that would reach below one request alone stops there.
		{"a steep step stops at one alone", append([]Point{idle}, at(4, 2, 10, 20)...), 4, 9.55},
		{"three that held all three", append([]Point{idle}, at(3, 3, 6, 8, 10)...), 3, 8},
		// A failed probe held its position: two of three at level 3.
		{"one of three failed", append([]Point{idle}, at(3, 3, 8, 10)...), 3, 9},
		{"no burst of one: nothing filled in", at(5.4, 2, 19.45, 23.49), 5.4, 21.47},
		// Lone probes that met other prefills stand at their levels (split),
		// as the last of that many: none is one request alone to fill from.
		{"lone probes at their levels only", []Point{{Time: t0, Load: 2, InFlight: 2, Level: 1.8, TTFT: 5}, {Time: t0.Add(time.Minute), Load: 4, InFlight: 4, Level: 3, TTFT: 12}}, 3, 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, together := split(tc.points)
			c := cellTTFT(together, "mean")
			for _, k := range c {
				if math.Abs(k.Load-tc.level) < 1e-9 {
					if math.Abs(k.Value-tc.want) > 0.01 {
						t.Errorf("cell of %g: %.3f s, want %.2f (curve %v)", tc.level, k.Value, tc.want, c)
					}
					return
				}
			}
			t.Errorf("no knot at %g: %v", tc.level, c)
		})
	}
}
