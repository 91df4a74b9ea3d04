package statuspage

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-dev/headroom/capacity"
)

// chart is one SLO's fitted law, its probes and its threshold against the
// requests sent together, with the load now and the capacity marked, as
// SVG coordinates in a viewBox of chartW x chartH.
type chart struct {
	SLO, Title   string
	Model        string // polyline points: the fitted law for N requests together
	Dots         []dot
	Clipped      []dot // points above the y axis's top, drawn at the top
	XTicks       []tick
	YTicks       []tick
	XLabel       string
	Threshold    marker
	Load         *marker // the requests in flight now; nil when unknown
	Capacity     *marker // the capacity, or its lower bound ("≥")
	Band         *band   // the capacity's bounds
	Left, Right  float64 // the plot's edges
	Top, Bottom  float64
	ClippedNote  string
	PlotW, PlotH float64
}

type dot struct {
	X, Y  float64
	Burst bool
	Title string
}

type tick struct {
	At   float64
	Text string
}

// marker is a line across the plot at At, labelled.
type marker struct {
	At    float64
	Label string
	// LabelX, LabelY and Anchor place the label inside the plot.
	LabelX, LabelY float64
	Anchor         string
}

type band struct{ X, W float64 }

const (
	chartW, chartH                = 320.0, 190.0
	padLeft, padRight             = 46.0, 10.0
	padTop, padBottom             = 10.0, 38.0
	charW                         = 5.6 // px per character of the 10 px labels
	outlierSlack                  = 2   // the y axis reaches this far past the threshold and the median point
	maxTicks                      = 6
	unitSeconds, unitTokensPerSec = "s", "tok/s"
)

// unit is the SLO's unit, as its axis shows it.
func unit(slo string) string {
	if slo == "decode_tokens_per_second" {
		return unitTokensPerSec
	}
	return unitSeconds
}

// sloTitle names an SLO for people.
func sloTitle(slo string) string {
	switch slo {
	case "ttft_seconds":
		return "time to first token"
	case "e2e_seconds":
		return "end-to-end time"
	case "itl_seconds":
		return "inter-token latency"
	case "decode_tokens_per_second":
		return "decode speed"
	}
	return slo
}

// shown says whether a point is drawn: not a probe in a burst's aftermath,
// nor one its deadline cut (lost: its latencies are where its stream
// stopped, not what it took).
func shown(p capacity.Point) bool { return !p.Aftermath && !p.Lost }

// plot draws an SLO's fitted law for N requests together, its probes'
// values at the loads they met (a burst's at its level), its threshold,
// the load now and the capacity with its bounds. The y axis reaches the
// threshold and the bulk of the points with room to spare; an outlier
// above it is drawn at the top and counted, not allowed to squash the rest.
func plot(s capacity.SLO, e capacity.Estimate) chart {
	var xs, ys []float64
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, p := range e.Points {
		if v := s.Of(p); finite(p.Load) && finite(v) && shown(p) {
			xs, ys = append(xs, p.Load), append(ys, v)
		}
	}
	maxX := 1.0
	for _, v := range append(slices.Clone(xs), e.Load, e.Capacity, e.Lower) {
		if finite(v) {
			maxX = math.Max(maxX, v)
		}
	}
	if finite(e.Upper) {
		maxX = math.Max(maxX, math.Min(e.Upper, 2*maxX))
	}
	maxX *= 1.1
	// Twice the threshold or the median, whichever is higher: room for
	// the bulk of the points and for what a breach looks like, and an
	// outlier (a 151 s TTFT among 2 s ones) left above it.
	maxY := s.Threshold
	if len(ys) > 0 {
		maxY = math.Max(maxY, quantile(ys, 0.5))
	}
	maxY *= outlierSlack
	xt, yt := ticks(maxX), ticks(maxY)
	maxX, maxY = xt[len(xt)-1].At, yt[len(yt)-1].At
	c := chart{SLO: s.Name, Title: fmt.Sprintf("%s (%s)", sloTitle(s.Name), unit(s.Name)), XLabel: "requests in flight",
		Left: padLeft, Right: chartW - padRight, Top: padTop, Bottom: chartH - padBottom}
	c.PlotW, c.PlotH = c.Right-c.Left, c.Bottom-c.Top
	x := func(v float64) float64 { return c.Left + c.PlotW*v/maxX }
	y := func(v float64) float64 { return c.Bottom - c.PlotH*math.Min(v, maxY)/maxY }
	for _, t := range xt {
		c.XTicks = append(c.XTicks, tick{x(t.At), t.Text})
	}
	for _, t := range yt {
		c.YTicks = append(c.YTicks, tick{y(t.At), t.Text})
	}
	var line strings.Builder
	for _, k := range s.Curve {
		if !finite(k.Load) || !finite(k.Value) || k.Load > maxX {
			continue
		}
		fmt.Fprintf(&line, "%.1f,%.1f ", x(k.Load), y(k.Value))
		if k.Value > maxY { // the law has left the chart at the top
			break
		}
	}
	c.Model = strings.TrimSpace(line.String())
	for _, p := range e.Points {
		v := s.Of(p)
		if !finite(p.Load) || !finite(v) || !shown(p) {
			continue
		}
		d := dot{X: x(p.Load), Y: y(v), Burst: p.Burst > 0, Title: fmt.Sprintf("%s at %s requests", withUnit(v, s.Name), short(p.Load))}
		if v > maxY {
			c.Clipped = append(c.Clipped, d)
		} else {
			c.Dots = append(c.Dots, d)
		}
	}
	if n := len(c.Clipped); n > 0 {
		c.ClippedNote = fmt.Sprintf("%d above %s, marked over the chart", n, withUnit(maxY, s.Name))
	}
	// Labels: the threshold's over its line at the left, the load's and the
	// capacity's at the top, each on its own row so they never overlap.
	verb := "max"
	if s.Name == "decode_tokens_per_second" {
		verb = "min"
	}
	c.Threshold = marker{At: y(s.Threshold), Label: fmt.Sprintf("%s %s", verb, withUnit(s.Threshold, s.Name))}
	c.Threshold.LabelX, c.Threshold.LabelY, c.Threshold.Anchor = c.Right-3, c.Threshold.At-3, "end"
	if c.Threshold.LabelY < c.Top+34 { // under the line, clear of the top rows
		c.Threshold.LabelY = c.Threshold.At + 11
	}
	if finite(e.Load) {
		c.Load = c.vertical(x(e.Load), "load "+short(e.Load), 0)
	}
	switch {
	case e.BoundsOne() && finite(e.Lower):
		c.Capacity = c.vertical(x(e.Lower), "capacity "+e.Shown(), 1)
	case e.Bound != "":
		// A bound under one request places nothing: no marker at zero.
	case finite(e.Capacity):
		c.Capacity = c.vertical(x(e.Capacity), "capacity "+e.Shown(), 1)
		if finite(e.Lower) {
			hi := c.Right
			if finite(e.Upper) {
				hi = math.Min(hi, x(e.Upper))
			}
			c.Band = &band{X: x(e.Lower), W: math.Max(0, hi-x(e.Lower))}
		}
	}
	return c
}

// vertical is a marker at x with its label on the given row from the top,
// right of the line, or left of it where it would leave the plot.
func (c chart) vertical(x float64, label string, row int) *marker {
	m := &marker{At: x, Label: label, LabelX: x + 3, LabelY: c.Top + 11 + 12*float64(row), Anchor: "start"}
	if x+3+charW*float64(len([]rune(label))) > c.Right {
		m.LabelX, m.Anchor = x-3, "end"
	}
	return m
}

// ticks are round values from 0 covering max, at most maxTicks+1 of them.
func ticks(max float64) []tick {
	if !(max > 0) || math.IsInf(max, 0) {
		max = 1
	}
	raw := max / maxTicks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []tick
	for i := 0; ; i++ {
		v := float64(i) * step
		out = append(out, tick{v, strconv.FormatFloat(v, 'g', 4, 64)})
		if v >= max-step*1e-9 || i > maxTicks+1 {
			return out
		}
	}
}

func quantile(vs []float64, q float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

// short is a count or value to the precision a label needs.
func short(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// withUnit is an SLO's value with its unit: seconds below one in ms.
func withUnit(v float64, slo string) string {
	if unit(slo) == unitSeconds {
		if v < 1 {
			return strconv.FormatFloat(1000*v, 'g', 3, 64) + " ms"
		}
		return strconv.FormatFloat(v, 'g', 3, 64) + " s"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + " tok/s"
}
