package capacity

import (
	"math"
	"sort"
)

// Knot is one point of a fitted law: its value at Load requests together.
type Knot struct {
	Load  float64 `json:"load"`
	Value float64 `json:"value"`
	N     int     `json:"samples"`
}

// Curve is a fitted law sampled against the requests sent together.
type Curve []Knot

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
