package capacity

import (
	"math"
	"sort"
)

// Burst is the size of the calibration burst a use case wants now: how many
// concurrent probes of its scenario to send at once, 0 for none. A burst
// measures the model's slopes (model.go) at a level the window has not
// reached, as a benchmark's next cell does. Until a law is placed the levels
// double, so that the data reach twice any capacity they bound in a few
// bursts; once placed, a burst brackets the crossing where it still lies
// past the levels measured, or where the bounds are wider than a third of
// the estimate. Never while an SLO is breached (more load would only hurt),
// and only at a quiet moment: the load now no higher than the median of the
// window's lone probes. It is at most maxBurst probes, and it competes with
// the requests queued now (queued), which count towards its level.
func Burst(e Estimate, load, queued float64, maxBurst int) int {
	if maxBurst < 2 || math.IsNaN(load) || math.IsNaN(queued) || e.Margin < 0 {
		return 0
	}
	var loads []float64
	top := 1.0
	for _, p := range e.Points {
		switch {
		case p.Aftermath || math.IsNaN(p.Load):
		case p.Burst > 1 || p.Cell > 0:
			top = math.Max(top, p.Load)
		default:
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
	level := 0.0
	switch {
	case math.IsNaN(e.Capacity) && e.Aim > growth*top:
		// The laws cross far past the levels measured: the next level
		// aims at the crossing, at most leap times the highest, so that
		// one wrong extrapolation costs one burst.
		level = math.Min(e.Aim, leap*top)
	case math.IsNaN(e.Capacity):
		// No placed law: the next level doubles the highest, from three (two
		// levels three apart carry a slope through a probe's noise).
		level = math.Max(3, growth*top)
	case e.Capacity > placedWithin*top || e.Upper-e.Lower > precision*e.Capacity+1:
		level = math.Min(math.Max(math.Ceil(e.Capacity), top+1), growth*top)
	default:
		return 0
	}
	if top >= float64(maxBurst) {
		return 0 // the largest burst allowed was measured already
	}
	n := math.Max(math.Round(level-queued), 2)
	return int(math.Min(n, float64(maxBurst)))
}

// Calibration's search, named in one place (docs/capacity-model.md):
const (
	// growth is how much each burst raises the highest level measured:
	// doubling reaches a capacity of 64 from one request in six bursts.
	growth = 2.0
	// leap is the most one burst raises the level towards a crossing the
	// laws place far past it: a capacity of 100 is reached from 3 in
	// three bursts, where doubling takes six and the budget pays for few.
	leap = 4.0
	// placedWithin: a capacity past this multiple of the highest level
	// measured is extrapolated further than the 15% a benchmark's cell
	// spacing gives, and a burst nearer it is worth its cost.
	placedWithin = 1.25
	// precision: bounds wider than this share of the estimate, past the
	// whole request a band always spans (model.go), want a burst at the
	// crossing, whose measurement narrows them most; no burst narrows
	// that request.
	precision = 0.3
)
