package capacity

import (
	"math"
	"sort"
)

// Burst is the size of the calibration burst a use case wants now: how many
// concurrent probes of its scenario to send at once, 0 for none. Bursts
// measure the burst curve (see Evaluate) as a benchmark searches for a
// capacity, one cell at a time: each aims at the load where the thresholds
// are expected to break, until a passing and a failing load lie close
// enough to interpolate between. Never while an SLO is breached (more load
// would only hurt), and only at a quiet moment: the load now no higher than
// the median of the window's lone probes. It is at most maxBurst probes.
//
// The burst's loads are its size plus what it meets: for TTFT, the requests
// queued when it is sent (queued), at least, and those arriving while it
// prefills, which no one can plan for (monitor.BurstLevel); for the other
// SLOs, every request in flight (load). One burst measures every SLO, each
// at its own load, so the SLO expected to break at the smallest burst
// decides.
func Burst(e Estimate, load, queued float64, maxBurst int) int {
	if maxBurst < 2 || math.IsNaN(load) || math.IsNaN(queued) || e.Margin < 0 {
		return 0
	}
	lone, together := split(e.Points)
	var loads []float64
	for _, p := range lone {
		if !math.IsNaN(p.Load) {
			loads = append(loads, p.Load)
		}
	}
	if len(loads) == 0 {
		return 0
	}
	sort.Float64s(loads)
	if load > loads[len(loads)/2] {
		return 0
	}
	// The smallest burst that raises the level MinBurstSpread past a burst of one,
	// at least two: a burst that cannot spread the levels cannot carry a fit.
	// A lone probe counts as one at up to level 1.5 (split), so its level can
	// lie above 1.
	idle := math.Inf(1)
	for _, p := range together {
		if p.Burst == 1 {
			idle = math.Min(idle, p.Load)
		}
	}
	if math.IsInf(idle, 1) {
		idle = 1
	}
	least := max(math.Ceil(idle+MinBurstSpread-queued), 2)
	a, ok := choose(aims(e.SLOs, load, queued, math.Max(loads[len(loads)-1], MinSpread+1), e.Overhead), least)
	if !ok {
		return 0
	}
	// In floats until bounded: an extrapolated aim can be far off.
	n := math.Max(math.Round(a.level-a.base), least)
	if n > float64(maxBurst) {
		n = float64(maxBurst)
		if lp, _, ok := lastPass(a.ms); ok && a.base+n <= lp {
			return 0 // the largest burst allowed was measured already
		}
	}
	return int(n)
}

// aim is where one SLO's search stands, in the SLO's own load.
type aim struct {
	// breaks is where it is expected to break: its crossing once bracketed,
	// else where it was seen failing, else where the next burst would look.
	breaks float64
	level  float64 // the next burst's load; 0 when bracketed (nextLevel)
	base   float64 // the load a burst adds its size to
	ms     []Knot
	open   bool    // within its threshold as far as its curve can be followed
	reach  float64 // how far past its highest load its curve is followed (burstReach)
}

func aims(slos []SLO, load, queued, first, overhead float64) []aim {
	out := make([]aim, len(slos))
	for i, s := range slos {
		a := aim{base: load, ms: margins(s), open: math.IsInf(s.BurstCapacity, 1), reach: burstReach(s.Name)}
		if s.Name == "ttft_seconds" || s.Name == "e2e_seconds" {
			a.base = queued // an E2E's curve reaches a load once its TTFT's does
		}
		a.level = nextLevel(a.ms, first)
		if s.Name == "ttft_seconds" && len(a.ms) == 1 && a.ms[0].Value > 0 && a.ms[0].Value < 1 {
			// From one level only: requests sent together queue for one
			// prefill compute, so the TTFT of n grows about as n times one
			// request's prefill past the overhead (burstReach, Overhead),
			// and the first burst aims where that reaches the threshold.
			// At a long context that is a burst of two to four, not the
			// highest load production made.
			v, o := s.Threshold*(1-a.ms[0].Value), overhead
			if !(o < v) {
				o = 0 // as Curve.extended
			}
			a.level = math.Max(math.Round(a.ms[0].Load*(s.Threshold-o)/(v-o)), 2)
		}
		a.breaks = s.BurstCapacity
		if math.IsNaN(a.breaks) || a.open {
			a.breaks = a.level
			if f, ok := firstFail(a.ms); ok {
				a.breaks = f.Load
			}
		}
		out[i] = a
	}
	return out
}

// choose is the SLO the next burst aims for: the one expected to break at
// the smallest burst, leaving out those expected to break within the
// smallest burst, which any burst measures, unless all are. Once that one
// is bracketed, a threshold that held only to below its crossing caps the
// capacity at that reach (lowest), so the search follows it on; ok is
// false when there is nothing left to search.
func choose(as []aim, least float64) (aim, bool) {
	if len(as) == 0 {
		return aim{}, false
	}
	within := func(a aim) bool { return a.breaks-a.base < least }
	bind := as[0]
	for _, a := range as[1:] {
		if within(bind) && !within(a) || within(a) == within(bind) && a.breaks-a.base < bind.breaks-bind.base {
			bind = a
		}
	}
	if bind.level > 0 {
		return bind, true
	}
	var next aim
	for _, a := range as {
		if a.open && a.level > 0 && a.reach*a.ms[len(a.ms)-1].Load < bind.breaks && (next.level == 0 || a.level-a.base < next.level-next.base) {
			next = a
		}
	}
	return next, next.level > 0
}

// margins are an SLO's burst curve as relative margins to its threshold,
// which fall with load as the curve is monotone.
func margins(s SLO) []Knot {
	_, increasing := metric(s.Name)
	var out []Knot
	for _, k := range s.BurstCurve {
		if k.N == 0 {
			continue // a model's knot (proportional), not a measured level
		}
		m := (k.Value - s.Threshold) / s.Threshold
		if increasing {
			m = -m
		}
		out = append(out, Knot{Load: k.Load, Value: m, N: k.N})
	}
	return out
}

func firstFail(ms []Knot) (Knot, bool) {
	for _, k := range ms {
		if k.Value < 0 {
			return k, true
		}
	}
	return Knot{}, false
}

func lastPass(ms []Knot) (load, margin float64, ok bool) {
	for _, k := range ms {
		if k.Value < 0 {
			break
		}
		load, margin, ok = k.Load, k.Value, true
	}
	return load, margin, ok
}

// nextLevel is the load the next burst should make, 0 when the crossing is
// bracketed closely enough (within 2 requests or a quarter of the passing
// level) or lies below two requests. Between a passing and a failing level it
// aims where the margin, taken as linear in load, reaches zero; above the
// highest passing level it extrapolates the margin's fall from the lowest
// level, doubling the highest where the margin has not fallen; from none or
// one level it starts at first, the highest load production made.
//
// The extrapolation is not capped: each burst costs its time out of the
// probe budget, so reaching the crossing in doubling steps would take the
// bursts past what a window can pay for (docs/capacity.md, "The search aims
// at the crossing"). What a burst may cost production is bounded by
// maxBurst, which is the operator's.
func nextLevel(ms []Knot, first float64) float64 {
	lp, mp, pass := lastPass(ms)
	fail, failed := firstFail(ms)
	switch {
	case failed && !pass:
		if fail.Load/2 < 2 {
			return 0
		}
		return math.Round(fail.Load / 2)
	case failed:
		if fail.Load-lp <= math.Max(2, lp/4) {
			return 0
		}
		at := lp + (fail.Load-lp)*mp/(mp-fail.Value)
		return math.Min(math.Max(math.Round(at), lp+1), fail.Load-1)
	case !pass:
		return math.Round(first)
	}
	if len(ms) == 1 {
		return math.Round(math.Max(2*lp, first))
	}
	l0, m0 := ms[0].Load, ms[0].Value
	if m0 <= mp {
		return math.Round(2 * lp)
	}
	return math.Max(math.Round(lp+mp*(lp-l0)/(m0-mp)), lp+1)
}
