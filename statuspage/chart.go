package statuspage

import (
	"fmt"
	"math"
	"strings"

	"github.com/headroom-dev/headroom/capacity"
)

// chart is one SLO's curves as SVG coordinates, in a viewBox of w x h.
type chart struct {
	SLO, Threshold   string
	Model            string // polyline points: the fitted law for N requests together
	Dots             []dot
	ThresholdY       float64
	MaxLoad, MaxText string
}

type dot struct {
	X, Y  float64
	Burst bool
}

const w, h, pad = 240.0, 120.0, 4.0

// plot draws an SLO's fitted law for N requests together, its probes'
// values at the loads they met (a burst's at its level) and its threshold.
func plot(s capacity.SLO, points []capacity.Point) chart {
	maxX, maxY := 1.0, s.Threshold*1.25
	grow := func(x, y float64) {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			maxX = math.Max(maxX, x)
		}
		if !math.IsNaN(y) && !math.IsInf(y, 0) {
			maxY = math.Max(maxY, y)
		}
	}
	for _, p := range points {
		grow(p.Load, s.Of(p))
	}
	for _, k := range s.Curve {
		grow(k.Load, k.Value)
	}
	x := func(v float64) float64 { return pad + (w-2*pad)*v/maxX }
	y := func(v float64) float64 { return h - pad - (h-2*pad)*v/maxY }
	line := func(c capacity.Curve) string {
		var b strings.Builder
		for _, k := range c {
			if !math.IsNaN(k.Load) && !math.IsNaN(k.Value) {
				fmt.Fprintf(&b, "%.1f,%.1f ", x(k.Load), y(k.Value))
			}
		}
		return strings.TrimSpace(b.String())
	}
	c := chart{SLO: s.Name, Threshold: fmt.Sprintf("%g", s.Threshold), Model: line(s.Curve),
		ThresholdY: y(s.Threshold), MaxLoad: fmt.Sprintf("%.0f", maxX), MaxText: fmt.Sprintf("%.3g", maxY)}
	for _, p := range points {
		if v := s.Of(p); !math.IsNaN(p.Load) && !math.IsNaN(v) && !p.Aftermath {
			c.Dots = append(c.Dots, dot{X: x(p.Load), Y: y(v), Burst: p.Burst > 0})
		}
	}
	return c
}
