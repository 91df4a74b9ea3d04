package bench

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// Palette colours the series; saturated so a test can tell data from axes.
var Palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// Series is one line of a chart. Right puts it on the chart's second y axis;
// Scatter draws its points without the line; Color overrides the palette's.
// Err, when set, is each point's 95% interval half-width, drawn as a bar.
type Series struct {
	Name    string
	Points  [][2]float64
	Err     []float64
	Right   bool
	Scatter bool
	Color   string
}

// Rule is a horizontal threshold or a vertical limit marker; a horizontal one
// with Right is read on the second y axis.
type Rule struct {
	At    float64
	Label string
	Right bool
}

// Chart is a line chart drawn as inline SVG: nothing is fetched at view time.
// YLabel2 names the second y axis, drawn when a series is Right.
type Chart struct {
	ID, Title, XLabel, YLabel, YLabel2 string
	Series                             []Series
	HRules, VRules                     []Rule
}

const (
	chartW, chartH         = 880, 340
	padL, padT, padB       = 64.0, 16.0, 44.0
	legendRow, legendChar  = 18.0, 6.6 // px per legend line and per character at font-size 11
	legendSwatch, padRight = 38.0, 12.0
)

// maxTicks bounds an axis's ticks whatever its data: a report's numbers are
// checked on load, but a chart is drawn of whatever it is given.
const maxTicks = 12

// ticks are round values covering 0..max.
func ticks(max float64) []float64 {
	if !(max > 0) || math.IsInf(max, 0) {
		return []float64{0, 1}
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if !(step > 0) || math.IsInf(step, 0) { // max/5 underflowed or overflowed
		return []float64{0, max}
	}
	var out []float64
	for v := 0.0; len(out) < maxTicks && !math.IsInf(v, 0); v += step {
		out = append(out, v)
		if v > max-step*0.001 {
			break
		}
	}
	return out
}

// logTicks are powers of two from lo to hi: concurrency ladders double. A
// span of more than maxTicks doublings takes every second, fourth, ...
// power, so that the axis keeps at most maxTicks+1 ticks.
func logTicks(lo, hi float64) []float64 {
	first := math.Floor(math.Log2(lo))
	every := math.Max(1, math.Ceil((math.Log2(hi)-first)/maxTicks))
	var out []float64
	for e := first; len(out) <= maxTicks; e += every {
		v := math.Pow(2, e)
		if math.IsInf(v, 0) || v > hi*1.0001 {
			break
		}
		out = append(out, v)
	}
	return out
}

func num(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// xScale maps the x values onto the plot: logarithmic when they span more
// than 10x, so a ladder of 1..256 does not squeeze 1..32 into its left edge.
type xScale struct {
	ticks  []float64
	log    bool
	lo, hi float64
}

func newXScale(xs []float64) xScale {
	lo, hi := math.Inf(1), 0.0
	for _, v := range xs {
		if v > 0 && !math.IsInf(v, 0) {
			lo = math.Min(lo, v)
			hi = math.Max(hi, v)
		}
	}
	if hi > 0 && hi/lo > 10 {
		t := logTicks(lo, hi)
		return xScale{ticks: t, log: true, lo: t[0], hi: math.Max(t[len(t)-1], hi)}
	}
	t := ticks(hi)
	return xScale{ticks: t, hi: t[len(t)-1]}
}

// at is v's position from 0 to 1 along the axis.
func (s xScale) at(v float64) float64 {
	if s.log {
		// Differences of logarithms: hi/lo may overflow.
		return (math.Log(math.Max(v, s.lo)) - math.Log(s.lo)) / (math.Log(s.hi) - math.Log(s.lo))
	}
	return v / s.hi
}

// legendWidth is the room the legend needs right of the plot, so that no
// series name is clipped.
func (c Chart) legendWidth() float64 {
	longest := 0
	for _, s := range c.Series {
		longest = max(longest, len([]rune(s.Name)))
	}
	return legendSwatch + legendChar*float64(longest) + padRight
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// finite is the series without its points (and their error bars) that
// are not finite numbers. It copies: a chart's caller keeps its series.
func (s Series) finite() Series {
	pts, errs := s.Points[:0:0], s.Err[:0:0]
	for i, p := range s.Points {
		if !isFinite(p[0]) || !isFinite(p[1]) {
			continue
		}
		pts = append(pts, p)
		if i < len(s.Err) {
			e := s.Err[i]
			if !isFinite(e) {
				e = 0
			}
			errs = append(errs, e)
		}
	}
	s.Points, s.Err = pts, errs
	return s
}

func finiteRules(rs []Rule) []Rule {
	var out []Rule
	for _, r := range rs {
		if isFinite(r.At) {
			out = append(out, r)
		}
	}
	return out
}

// SVG renders the chart.
func (c Chart) SVG() template.HTML {
	var xs []float64
	yMax := [2]float64{}
	right := 0
	side := func(r bool) int {
		if r {
			return 1
		}
		return 0
	}
	// A point that is no number has no place on the chart.
	series := make([]Series, len(c.Series))
	for i, s := range c.Series {
		series[i] = s.finite()
	}
	c.Series = series
	for _, s := range c.Series {
		right += side(s.Right)
		for i, p := range s.Points {
			xs = append(xs, p[0])
			top := p[1]
			if i < len(s.Err) && s.Err[i] > 0 {
				top += s.Err[i]
			}
			yMax[side(s.Right)] = math.Max(yMax[side(s.Right)], top)
		}
	}
	c.HRules, c.VRules = finiteRules(c.HRules), finiteRules(c.VRules)
	for _, r := range c.HRules {
		yMax[side(r.Right)] = math.Max(yMax[side(r.Right)], r.At)
	}
	for _, r := range c.VRules {
		xs = append(xs, r.At)
	}
	xsc := newXScale(xs)
	top := func(v float64) float64 { return math.Min(v*1.05, math.MaxFloat64) }
	yt := [2][]float64{ticks(top(yMax[0])), ticks(top(yMax[1]))}
	padR := c.legendWidth()
	if right > 0 {
		padR += 48 // the second axis's ticks and label
	}
	height := math.Max(chartH, padT+padB+legendRow*float64(len(c.Series))+8)
	pw, ph := chartW-padL-padR, height-padT-padB
	x := func(v float64) float64 { return padL + xsc.at(v)*pw }
	y := func(v float64, r bool) float64 {
		t := yt[side(r)]
		return padT + ph - v/t[len(t)-1]*ph
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %.0f" width="%d" height="%.0f" role="img" aria-label="%s">`,
		chartW, height, chartW, height, template.HTMLEscapeString(c.Title))
	for _, t := range yt[0] {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, padL, padL+pw, y(t, false), y(t, false))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#444">%s</text>`, padL-6, y(t, false)+4, num(t))
	}
	if right > 0 {
		for _, t := range yt[1] {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#444">%s</text>`, padL+pw+6, y(t, true)+4, num(t))
		}
		fmt.Fprintf(&b, `<text transform="translate(%.1f %.1f) rotate(90)" text-anchor="middle" font-size="12" fill="#222">%s</text>`,
			padL+pw+40, padT+ph/2, template.HTMLEscapeString(c.YLabel2))
	}
	for _, t := range xsc.ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="#444">%s</text>`, x(t), padT+ph+16, num(t))
	}
	xLabel := c.XLabel
	if xsc.log {
		xLabel += " (log scale)"
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`, padL, padT, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="12" fill="#222">%s</text>`, padL+pw/2, height-6, template.HTMLEscapeString(xLabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle" font-size="12" fill="#222">%s</text>`, padT+ph/2, template.HTMLEscapeString(c.YLabel))
	// Rule labels stay inside the plot, clear of the ticks outside it, and
	// clear of one another: each takes the first free place of its own.
	labels := labelPlacer{left: padL, right: padL + pw, top: padT, bottom: padT + ph}
	for _, r := range c.HRules {
		ly := y(r.At, r.Right)
		fmt.Fprintf(&b, `<line class="threshold" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="6 4"/>`, padL, padL+pw, ly, ly)
		var at []labelAt
		for _, yy := range []float64{ly - 4, ly + 14} {
			near, far := labelAt{padL + 4, yy, true}, labelAt{padL + pw - 4, yy, false}
			if r.Right { // read on the right axis: labelled on its side
				near, far = far, near
			}
			at = append(at, near, far)
		}
		labels.write(&b, r.Label, at, "threshold-label")
	}
	for _, r := range c.VRules {
		lx := x(r.At)
		fmt.Fprintf(&b, `<line class="limit" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="2 3"/>`, lx, lx, padT, padT+ph)
		var at []labelAt
		for row := range 6 {
			yy := padT + 12 + 14*float64(row)
			at = append(at, labelAt{lx + 4, yy, true}, labelAt{lx - 4, yy, false})
		}
		labels.write(&b, r.Label, at, "limit-label")
	}
	legendX := chartW - c.legendWidth()
	for i, s := range c.Series {
		col := Palette[i%len(Palette)]
		if s.Color != "" {
			col = s.Color
		}
		dash := ""
		if s.Right {
			dash = ` stroke-dasharray="8 3"`
		}
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1], s.Right)))
		}
		if !s.Scatter {
			fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="2.5"%s points="%s"/>`, col, dash, strings.Join(pts, " "))
		}
		for i, p := range s.Points {
			title := fmt.Sprintf("%s: %s at %s", s.Name, num(p[1]), num(p[0]))
			if i < len(s.Err) && s.Err[i] > 0 {
				e := s.Err[i]
				fmt.Fprintf(&b, `<line class="ci" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`,
					x(p[0]), x(p[0]), y(math.Max(0, p[1]-e), s.Right), y(p[1]+e, s.Right), col)
				title += fmt.Sprintf(" ± %s (95%%)", num(e))
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s</title></circle>`,
				x(p[0]), y(p[1], s.Right), col, template.HTMLEscapeString(title))
		}
		ly := padT + 14 + float64(i)*legendRow
		if s.Scatter {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`, legendX+10, ly-4, col)
		} else {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="3"%s/>`, legendX, legendX+20, ly-4, ly-4, col, dash)
		}
		fmt.Fprintf(&b, `<text class="legend" x="%.1f" y="%.1f" font-size="11" fill="#222">%s</text>`, legendX+26, ly, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// labelAt is a place for a label: its anchor point, and whether the text
// starts there (else ends there).
type labelAt struct {
	x, y  float64
	start bool
}

// labelPlacer puts rule labels at the first of their places that lies
// inside the plot and overlaps no label placed before, their width taken
// at legendChar per character (font-size 11); the first place when none is
// free.
type labelPlacer struct {
	left, right, top, bottom float64
	placed                   [][4]float64 // x0, y0, x1, y1
}

func (p *labelPlacer) write(b *strings.Builder, text string, at []labelAt, class string) {
	w := legendChar * float64(len([]rune(text)))
	box := func(a labelAt) [4]float64 {
		x0 := a.x
		if !a.start {
			x0 -= w
		}
		return [4]float64{x0, a.y - 10, x0 + w, a.y + 2}
	}
	free := func(r [4]float64) bool {
		if r[0] < p.left || r[2] > p.right || r[1] < p.top || r[3] > p.bottom {
			return false
		}
		for _, q := range p.placed {
			if r[0] < q[2] && q[0] < r[2] && r[1] < q[3] && q[1] < r[3] {
				return false
			}
		}
		return true
	}
	chosen := at[0]
	for _, a := range at {
		if free(box(a)) {
			chosen = a
			break
		}
	}
	p.placed = append(p.placed, box(chosen))
	anchor := "end"
	if chosen.start {
		anchor = "start"
	}
	fmt.Fprintf(b, `<text class="%s" x="%.1f" y="%.1f" text-anchor="%s" font-size="11" fill="#555">%s</text>`,
		class, chosen.x, chosen.y, anchor, template.HTMLEscapeString(text))
}
