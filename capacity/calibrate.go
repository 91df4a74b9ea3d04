package capacity

import (
	"math"
	"sort"
)

// Burst is the size of the calibration burst a use case wants now: how many
// concurrent probes of its scenario to send at once, 0 for none. Bursts
// measure the burst curve (see Evaluate) as a benchmark searches for a
// capacity, one cell at a time: each aims at the level where the thresholds
// are expected to break, until a passing and a failing level lie close
// enough to interpolate between. Never while an SLO is breached (more load
// would only hurt), and only at a quiet moment: the load now no higher than
// the median of the window's lone probes. A burst's level is the requests it
// competes with for prefill: its size plus those queued when it is sent
// (queued), at least, and those arriving while it prefills, which no one can
// plan for (monitor.BurstLevel); the running ones are past their prefill.
// It is at most maxBurst probes, at least two.
func Burst(e Estimate, load, queued float64, maxBurst int) int {
	if maxBurst < 2 || math.IsNaN(load) || math.IsNaN(queued) || e.Margin < 0 {
		return 0
	}
	var loads []float64
	for _, p := range e.Points {
		if p.Burst == 0 && !math.IsNaN(p.Load) {
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
	ms := burstMargins(e.SLOs)
	level := nextLevel(ms, math.Max(loads[len(loads)-1], MinSpread+1))
	if level == 0 {
		return 0
	}
	n := max(int(math.Round(level-queued)), 2)
	if n > maxBurst {
		n = maxBurst
		if lp, _, ok := lastPass(ms); ok && queued+float64(n) <= lp {
			return 0 // the largest burst allowed was measured already
		}
	}
	return n
}

// burstMargins are the burst curve's knots with the smallest margin of any
// SLO at each: every SLO's curve has the same knots (one set of points), and
// each is monotone, so the margins fall with load.
func burstMargins(slos []SLO) []Knot {
	var out []Knot
	for i, s := range slos {
		_, increasing := metric(s.Name)
		for j, k := range s.BurstCurve {
			m := (k.Value - s.Threshold) / s.Threshold
			if increasing {
				m = -m
			}
			if i == 0 {
				out = append(out, Knot{Load: k.Load, Value: m, N: k.N})
			} else if j < len(out) {
				out[j].Value = math.Min(out[j].Value, m)
			}
		}
	}
	return out
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
// highest passing level it extrapolates the margin's fall, at most doubling;
// from none or one level it starts at first, the highest load production made.
func nextLevel(ms []Knot, first float64) float64 {
	lp, mp, pass := lastPass(ms)
	var fail *Knot
	for i := range ms {
		if ms[i].Value < 0 {
			fail = &ms[i]
			break
		}
	}
	switch {
	case fail != nil && !pass:
		if fail.Load/2 < 2 {
			return 0
		}
		return math.Round(fail.Load / 2)
	case fail != nil:
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
	at := 2 * lp
	if m0 > mp {
		at = math.Min(at, lp+mp*(lp-l0)/(m0-mp))
	}
	return math.Max(math.Round(at), lp+1)
}
