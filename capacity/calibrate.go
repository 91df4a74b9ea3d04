package capacity

import (
	"math"
	"slices"
	"sort"
	"time"
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
	for _, p := range e.Points {
		if !p.Aftermath && !math.IsNaN(p.Load) && p.Burst <= 1 && p.Cell == 0 {
			loads = append(loads, p.Load)
		}
	}
	top := burstTop(e)
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
	if Reached(e) >= float64(maxBurst) {
		return 0 // the largest burst allowed was sent already
	}
	n := math.Max(math.Round(level-queued), 2)
	return int(math.Min(n, float64(maxBurst)))
}

// burstTop is the highest level a burst or a bench cell of the window
// measured, at least 1: where calibration's next burst starts from.
func burstTop(e Estimate) float64 {
	top := 1.0
	for _, p := range e.Points {
		if !p.Aftermath && !math.IsNaN(p.Load) && (p.Burst > 1 || p.Cell > 0) {
			top = math.Max(top, p.Load)
		}
	}
	return top
}

// Reached is the largest burst the window holds, by its level or by the
// probes sent in it, whichever is more: past a limit it has reached, no
// burst goes (Burst). A burst's level counts the prompts its probes
// competed with, which may read under the probes sent (a burst of 64 at
// 63.4); another burst of the limit's size would measure that level
// again and reach no further.
func Reached(e Estimate) float64 {
	top := burstTop(e)
	for _, p := range e.Points {
		top = math.Max(top, float64(p.Burst))
	}
	return top
}

// BurstOutput is how many tokens each probe of a burst of n generates:
// enough that half the burst decodes together. A decode step's cost at a
// batch is measured only by sequences that decode in that batch, and a
// burst of short probes on an engine that prefills its prompts one after
// another decodes them a few at a time: the suite's one-at-a-time law,
// bursts of 32 8K prompts 0.49 s apart, each decoding 32 tokens in 0.3 s,
// measured the step at batches up to 4, so the decode law reached 8 where
// the capacity was 72. Half, since a law is trusted to Reach times its data
// and a burst aims at the crossing: first tokens g apart and decodes of T
// give batches up to T/g + 1, so T is (n/2 − 1)·g. Only where it
// Lengthens. The spacing g and the time between tokens are those of the use
// case's latest burst (BurstSpacing), whose batch was smaller: its step is
// the least this one's decode meets. An engine that prefills a burst
// together gives its first tokens at once, and its probes keep least.
// Before any burst, least. At most most (the use case's own output: its
// requests decode no longer), and rounded to a power of two, so that a
// scenario's probes take few distinct bodies.
func BurstOutput(e Estimate, n, least, most int) int {
	spacing, itl, ok := BurstSpacing(e.Points)
	if !ok || !Lengthens(e, least, most) {
		return least
	}
	want := math.Ceil(float64(n)/2-1) * spacing / itl
	out := least
	for float64(out)*math.Sqrt2 < want && out < most {
		out *= 2
	}
	return min(out, most)
}

// Lengthens says a use case's bursts may generate more tokens than its
// scenario's probes (least), up to its own output (most): only where the
// decode's reach is what holds its estimate back (Estimate.DecodeShort).
// Longer probes make a longer burst, and the budget pays for fewer: the
// suite's noise family, its first tokens spread by noise, lengthened every
// burst, and half its estimates within 15% went.
func Lengthens(e Estimate, least, most int) bool { return most > least && e.DecodeShort() }

// BurstSpacing is how far apart, per probe, the first tokens of the use
// case's latest calibration burst came, and the median of its probes' mean
// times between tokens; ok is false before a burst of two measured probes.
func BurstSpacing(points []Point) (spacing, itl float64, ok bool) {
	var latest time.Time
	for _, p := range points {
		if p.Burst > 1 && p.Cell == 0 && p.Time.After(latest) {
			latest = p.Time
		}
	}
	var ttfts, itls []float64
	for _, p := range points {
		if p.Burst > 1 && p.Cell == 0 && p.Time.Equal(latest) && !p.Lost && p.TTFT > 0 && p.ITL > 0 {
			ttfts, itls = append(ttfts, p.TTFT), append(itls, p.ITL)
		}
	}
	if len(ttfts) < 2 {
		return 0, 0, false
	}
	slices.Sort(itls)
	return (slices.Max(ttfts) - slices.Min(ttfts)) / float64(len(ttfts)-1), itls[len(itls)/2], true
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
	// whole request a band always spans (fitted.go), want a burst at the
	// crossing, whose measurement narrows them most; no burst narrows
	// that request.
	precision = 0.3
)
