package capacity

import (
	"math"
	"sort"
)

// Knot is one point of a fitted load-response curve.
type Knot struct {
	Load  float64 `json:"load"`
	Value float64 `json:"value"`
	N     int     `json:"samples"`
}

// Curve is a monotone piecewise-linear fit of one metric against load.
type Curve []Knot

// bin groups points by load rounded to the nearest request and takes the
// statistic of each bin: a per-bin median or percentile is what makes the fit
// robust to a few outliers, and the bin's weight is its sample count.
func bin(points []Point, value func(Point) float64, stat string) Curve {
	groups := map[int][]Point{}
	for _, p := range points {
		if math.IsNaN(p.Load) || p.Load <= 0 {
			continue
		}
		k := int(math.Round(p.Load))
		groups[k] = append(groups[k], p)
	}
	out := make(Curve, 0, len(groups))
	for _, g := range groups {
		vs := make([]float64, len(g))
		load := 0.0
		for i, p := range g {
			vs[i] = value(p)
			load += p.Load
		}
		out = append(out, Knot{Load: load / float64(len(g)), Value: Statistic(vs, stat), N: len(g)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Load < out[j].Load })
	return out
}

// sum adds two increasing load-responses, at every knot of either up to the
// highest load both reach: past it one of them is unknown. Below its first
// knot a curve is held at that knot's value, which it cannot exceed there.
// Means add up exactly; a percentile of a sum is at most the sum of the
// percentiles, so the sum errs high.
func sum(a, b Curve) Curve {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	hi := math.Min(a[len(a)-1].Load, b[len(b)-1].Load)
	ks := append(append(Curve(nil), a...), b...)
	sort.SliceStable(ks, func(i, j int) bool { return ks[i].Load < ks[j].Load })
	var out Curve
	for _, k := range ks {
		if k.Load > hi || len(out) > 0 && k.Load == out[len(out)-1].Load {
			continue
		}
		out = append(out, Knot{Load: k.Load, Value: a.at(k.Load) + b.at(k.Load), N: k.N})
	}
	return out
}

// at is the curve's value at load: linear between knots, held at the end
// knots' values outside them (sum asks for none past the last).
func (c Curve) at(load float64) float64 {
	if load <= c[0].Load {
		return c[0].Value
	}
	for i := 1; i < len(c); i++ {
		if load <= c[i].Load {
			a, b := c[i-1], c[i]
			return a.Value + (load-a.Load)*(b.Value-a.Value)/(b.Load-a.Load)
		}
	}
	return c[len(c)-1].Value
}

// isotonic makes the curve non-decreasing (or non-increasing when increasing
// is false) with the pool-adjacent-violators algorithm, weighted by samples.
// A load-response is monotone: more load never makes a server faster, so a
// dip is noise and is pooled away rather than believed.
func isotonic(c Curve, increasing bool) Curve {
	type block struct {
		sum, w     float64
		first, end int
	}
	sign := 1.0
	if !increasing {
		sign = -1
	}
	var bs []block
	for i, k := range c {
		bs = append(bs, block{sign * k.Value * float64(k.N), float64(k.N), i, i + 1})
		for len(bs) > 1 && bs[len(bs)-2].sum/bs[len(bs)-2].w > bs[len(bs)-1].sum/bs[len(bs)-1].w {
			a, b := bs[len(bs)-2], bs[len(bs)-1]
			bs = append(bs[:len(bs)-2], block{a.sum + b.sum, a.w + b.w, a.first, b.end})
		}
	}
	out := make(Curve, len(c))
	copy(out, c)
	for _, b := range bs {
		for i := b.first; i < b.end; i++ {
			out[i].Value = sign * b.sum / b.w
		}
	}
	return out
}

// crossing is the load at which a fitted curve reaches limit (bad is above
// the limit when increasing). It interpolates between knots, linearly where
// the curve is convex and else as between does, and extrapolates at most
// reach times the highest observed load.
// ok is false when the curve does not reach the limit within that reach.
func (c Curve) crossing(limit float64, increasing, convex bool, reach float64) (load float64, ok bool) {
	bad := func(v float64) bool {
		if increasing {
			return v > limit
		}
		return v < limit
	}
	if len(c) == 0 {
		return math.NaN(), false
	}
	if bad(c[0].Value) {
		// Breached at the lowest observed load: walk back along the first
		// segment's slope, not below one request.
		if len(c) > 1 {
			if l := interpolate(c[0], c[1], limit); l < c[0].Load {
				return math.Max(0, l), true
			}
		}
		return 0, true
	}
	for i := 1; i < len(c); i++ {
		if bad(c[i].Value) {
			if convex {
				return interpolate(c[i-1], c[i], limit), true
			}
			return between(c[i-1], c[i], limit), true
		}
	}
	if len(c) < 2 {
		return math.NaN(), false
	}
	last := c[len(c)-1]
	l := math.Inf(1)
	for _, from := range c.trend() {
		if x := interpolate(from, last, limit); x > last.Load {
			l = math.Min(l, x)
		}
	}
	if l <= reach*last.Load {
		return l, true
	}
	return math.NaN(), false
}

// trend is where the lines that carry a curve past its last knot start:
// the steeper of the overall slope and the upper half's (from the first
// knot at half the highest load or above), as a load-response bends
// upward as queues form, and an estimate must not promise what either
// trend denies. Only knots that differ from the last in load and value.
func (c Curve) trend() []Knot {
	last := c[len(c)-1]
	upper := last // the last knot itself when no earlier one reaches half its load
	for _, k := range c {
		if k.Load >= last.Load/2 {
			upper = k
			break
		}
	}
	var out []Knot
	for _, from := range []Knot{c[0], upper} {
		if last.Load > from.Load && last.Value != from.Value {
			out = append(out, from)
		}
	}
	return out
}

// extended is an increasing curve with a knot more at load to, marked as a
// model's by its zero samples: along its trend, or for a curve of one
// knot, proportionally to the load past the overhead. For TTFT of requests
// sent together, that is a bound: n prompts sent together need n prefills
// of compute but one overhead each, side by side (Overhead), so their mean
// TTFT is at most the overhead plus n times one prompt's prefill.
func (c Curve) extended(to, overhead float64) Curve {
	last := c[len(c)-1]
	if !(to > last.Load) {
		return c
	}
	if !(overhead < last.Value) {
		overhead = 0 // not this curve's: the knot is quicker than it
	}
	v := overhead + (last.Value-overhead)*to/last.Load
	if len(c) > 1 {
		v = last.Value
		for _, from := range c.trend() {
			v = math.Max(v, last.Value+(to-last.Load)*(last.Value-from.Value)/(last.Load-from.Load))
		}
	}
	return append(c[:len(c):len(c)], Knot{Load: to, Value: v})
}

// between is where the curve reaches v between two knots: linearly when
// they are within Reach of each other, as extrapolation is trusted that far;
// in log load across a wider gap. There a load-response can bend anywhere
// (a batch past the engine's CUDA-graph sizes, the KV cache filling) and
// the crossing is known only to within the gap's ratio: splitting the ratio
// rather than the difference keeps the estimate on the early side.
func between(a, b Knot, v float64) float64 {
	if b.Load <= Reach*a.Load || b.Value == a.Value {
		return interpolate(a, b, v)
	}
	return a.Load * math.Pow(b.Load/a.Load, (v-a.Value)/(b.Value-a.Value))
}

// wideGap is the upper of the two knots a crossing at load lies between
// when they are farther apart than Reach, where between can only guess; ok
// is false elsewhere.
func (c Curve) wideGap(load float64) (upper float64, ok bool) {
	for i := 1; i < len(c); i++ {
		if a, b := c[i-1].Load, c[i].Load; a < load && load < b {
			return b, b > Reach*a
		}
	}
	return 0, false
}

func interpolate(a, b Knot, v float64) float64 {
	if b.Value == a.Value {
		return b.Load
	}
	return a.Load + (v-a.Value)*(b.Load-a.Load)/(b.Value-a.Value)
}

// Statistic is mean, p50, p90, p95 or p99 of vs.
func Statistic(vs []float64, stat string) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	if stat == "mean" || stat == "" {
		s := 0.0
		for _, v := range vs {
			s += v
		}
		return s / float64(len(vs))
	}
	q := map[string]float64{"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}[stat]
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	// Linear interpolation between closest ranks, as Prometheus quantiles do.
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (pos-float64(lo))*(s[hi]-s[lo])
}
