package bench

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// Palette colours the series; saturated so a test can tell data from axes.
var Palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// Series is one line of a chart.
type Series struct {
	Name   string
	Points [][2]float64
}

// Rule is a horizontal threshold or a vertical limit marker.
type Rule struct {
	At    float64
	Label string
}

// Chart is a line chart drawn as inline SVG: nothing is fetched at view time.
type Chart struct {
	ID, Title, XLabel, YLabel string
	Series                    []Series
	HRules, VRules            []Rule
}

const (
	chartW, chartH                 = 720, 340
	padL, padR, padT, padB float64 = 64, 150, 16, 44
)

// ticks are round values covering 0..max.
func ticks(max float64) []float64 {
	if !(max > 0) {
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
	var out []float64
	for v := 0.0; v < max+step*0.999; v += step {
		out = append(out, v)
	}
	return out
}

func num(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// SVG renders the chart.
func (c Chart) SVG() template.HTML {
	xMax, yMax := 0.0, 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			xMax, yMax = math.Max(xMax, p[0]), math.Max(yMax, p[1])
		}
	}
	for _, r := range c.HRules {
		yMax = math.Max(yMax, r.At)
	}
	for _, r := range c.VRules {
		xMax = math.Max(xMax, r.At)
	}
	xt, yt := ticks(xMax), ticks(yMax*1.05)
	xMax, yMax = xt[len(xt)-1], yt[len(yt)-1]
	pw, ph := chartW-padL-padR, chartH-padT-padB
	x := func(v float64) float64 { return padL + v/xMax*pw }
	y := func(v float64) float64 { return padT + ph - v/yMax*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, template.HTMLEscapeString(c.Title))
	for _, t := range yt {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, padL, padL+pw, y(t), y(t))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#444">%s</text>`, padL-6, y(t)+4, num(t))
	}
	for _, t := range xt {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="#444">%s</text>`, x(t), padT+ph+16, num(t))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`, padL, padT, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="12" fill="#222">%s</text>`, padL+pw/2, chartH-6, template.HTMLEscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle" font-size="12" fill="#222">%s</text>`, padT+ph/2, template.HTMLEscapeString(c.YLabel))
	for _, r := range c.HRules {
		fmt.Fprintf(&b, `<line class="threshold" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="6 4"/>`, padL, padL+pw, y(r.At), y(r.At))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#555">%s</text>`, padL+4, y(r.At)-4, template.HTMLEscapeString(r.Label))
	}
	for _, r := range c.VRules {
		fmt.Fprintf(&b, `<line class="limit" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="2 3"/>`, x(r.At), x(r.At), padT, padT+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#555">%s</text>`, x(r.At)+4, padT+12, template.HTMLEscapeString(r.Label))
	}
	for i, s := range c.Series {
		col := Palette[i%len(Palette)]
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
		}
		fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="2.5" points="%s"/>`, col, strings.Join(pts, " "))
		for _, p := range s.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s at %s</title></circle>`,
				x(p[0]), y(p[1]), col, template.HTMLEscapeString(s.Name), num(p[1]), num(p[0]))
		}
		ly := padT + 14 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`, padL+pw+12, padL+pw+32, ly-4, ly-4, col)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="#222">%s</text>`, padL+pw+38, ly, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
