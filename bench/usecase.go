package bench

import (
	"fmt"
	"slices"
	"strings"
)

// useCaseView is one use case's part of the capacity analysis: the reference
// reports' chart, table at three loads and the sentences under them.
type useCaseView struct {
	UseCase
	Limit      Limit
	Thresholds string
	Levels     []int // the table's columns: one request, the first breach, the highest tested
	Rows       []metricRow
	Narrative  []string
	Charts     []Chart
}

type metricRow struct {
	Name   string
	Values []string // by Levels; "" where the level was not measured
}

// gauge is a per-request figure a use case is judged on: its threshold,
// and whether exceeding it (rather than falling below) breaks it.
type gauge struct {
	metric, name, unit string
	scale, threshold   float64
	upper              bool
}

func (u UseCase) gauges() []gauge {
	out := []gauge{}
	if u.TTFTMax > 0 || u.E2EMax <= 0 {
		out = append(out, gauge{"ttft_s", "TTFT", "s", 1, u.TTFTMax, true})
	}
	if u.E2EMax > 0 {
		out = append(out, gauge{"e2e_s", "End-to-end latency", "s", 1, u.E2EMax, true})
	}
	out = append(out, gauge{"decode_tps", "Generation speed", "tok/s", 1, u.DecodeMin, false})
	if u.ITLMax > 0 {
		out = append(out, gauge{"itl_s", "Inter-token latency", "ms", 1000, u.ITLMax, true})
	}
	return out
}

func (g gauge) format(v float64) string {
	if g.unit == "s" {
		return Units(v, "s")
	}
	return Units(g.scale*v, g.unit)
}

// breaks reports whether v crosses the gauge's threshold.
func (g gauge) breaks(v float64) bool {
	if g.threshold <= 0 {
		return false
	}
	return g.upper && v > g.threshold || !g.upper && v < g.threshold
}

// Goodput is the share of a cell's requests that met every threshold of the
// use case, each request judged on its own; a failed request met none.
func (u UseCase) Goodput(c *Cell) float64 {
	failed := 0
	for _, n := range c.Failures {
		failed += n
	}
	total := len(c.Requests) + failed
	if total == 0 {
		return 0
	}
	good := 0
	for _, q := range c.Requests {
		if u.meets(q) {
			good++
		}
	}
	return float64(good) / float64(total)
}

// meets reports whether one request met every threshold.
func (u UseCase) meets(q Request) bool {
	return (u.TTFTMax <= 0 || q.TTFT <= u.TTFTMax) && (u.E2EMax <= 0 || q.E2E <= u.E2EMax) &&
		(u.ITLMax <= 0 || q.ITL <= u.ITLMax) && (u.DecodeMin <= 0 || q.Decode >= u.DecodeMin)
}

// thresholdText describes the use case's thresholds in words.
func (u UseCase) thresholdText() string {
	var parts []string
	for _, g := range u.gauges() {
		if g.threshold <= 0 {
			continue
		}
		rel := "<"
		if !g.upper {
			rel = ">"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s", g.name, rel, g.format(g.threshold)))
	}
	s := strings.Join(parts, ", ")
	if u.Statistic != "mean" {
		s += " (" + u.Statistic + " over requests)"
	}
	return s
}

// useCaseView builds a use case's section from its ladder of closed-loop cells.
func (r *Report) useCaseView(u UseCase) useCaseView {
	l, _ := r.limitFor(u.Name)
	v := useCaseView{UseCase: u, Limit: l, Thresholds: u.thresholdText()}
	cells := r.ladder("closed", u.Context, u.Output)
	if len(cells) == 0 {
		v.Narrative = []string{fmt.Sprintf("Not measured: the sweep has no closed-loop cell at %d context and %d output tokens.", u.Context, u.Output)}
		return v
	}
	first, last := cells[0], cells[len(cells)-1]
	var breach *Cell
	for _, c := range cells {
		if u.Margin(c) < 0 {
			breach = c
			break
		}
	}
	at := last
	if breach != nil {
		at = breach
	}
	for _, n := range []int{first.Concurrency, at.Concurrency, last.Concurrency} {
		if !slices.Contains(v.Levels, n) {
			v.Levels = append(v.Levels, n)
		}
	}
	for _, g := range u.gauges() {
		row := metricRow{Name: g.name}
		for _, n := range v.Levels {
			c, _ := r.Cell(Key{Mode: "closed", Context: u.Context, Output: u.Output, Concurrency: n})
			val := c.Stats[g.metric].Get(u.Statistic)
			s := g.format(val)
			if u.Statistic == "mean" {
				s = c.withCI(s, g.metric, g.scale)
			}
			if g.breaks(val) {
				s += " (threshold exceeded)"
			}
			row.Values = append(row.Values, s)
		}
		v.Rows = append(v.Rows, row)
	}
	tput := metricRow{Name: "System throughput"}
	for _, n := range v.Levels {
		c, _ := r.Cell(Key{Mode: "closed", Context: u.Context, Output: u.Output, Concurrency: n})
		tput.Values = append(tput.Values, Units(c.Throughput, "tok/s"))
	}
	good := metricRow{Name: "Goodput (requests meeting every threshold)"}
	for _, n := range v.Levels {
		c, _ := r.Cell(Key{Mode: "closed", Context: u.Context, Output: u.Output, Concurrency: n})
		good.Values = append(good.Values, fmt.Sprintf("%.0f%%", 100*u.Goodput(c)))
	}
	v.Rows = append(v.Rows, tput, good)
	v.Narrative = u.narrative(l, breach, last)
	v.Charts = r.useCaseCharts(u, l, cells)
	return v
}

// narrative says where the limit is and why, in the reference reports' words.
func (u UseCase) narrative(l Limit, breach, last *Cell) []string {
	switch {
	case l.Failed != "":
		return []string{"Capacity limit: none measured. " + l.Failed + "."}
	case breach == nil:
		return []string{fmt.Sprintf("Capacity limit: above %d concurrent requests, the highest tested: no level crossed a threshold.", last.Concurrency),
			u.describe(last, "At that load")}
	case l.Capacity == 0:
		return []string{"Capacity limit: none. A single request already crosses a threshold.", u.describe(breach, "At 1 request")}
	}
	return []string{fmt.Sprintf("Capacity limit: %.1f concurrent requests, interpolated between the last level that passed and %d, the first that did not.", l.Capacity, breach.Concurrency),
		u.describe(breach, fmt.Sprintf("At %d concurrent requests", breach.Concurrency))}
}

// describe reads each threshold's figure at a cell against the threshold.
func (u UseCase) describe(c *Cell, lead string) string {
	var parts []string
	for _, g := range u.gauges() {
		if g.threshold <= 0 {
			continue
		}
		v := c.Stats[g.metric].Get(u.Statistic)
		what := "threshold"
		if !g.upper {
			what = "minimum"
		}
		var side string
		switch {
		case g.breaks(v) && g.upper:
			side = "above"
		case g.breaks(v):
			side = "below"
		case g.upper:
			side = "under"
		default:
			side = "above"
		}
		parts = append(parts, fmt.Sprintf("%s is %s, %s the %s %s", sentenceCase(g.name), g.format(v), side, g.format(g.threshold), what))
	}
	if c.SuccessRate < 1 {
		parts = append(parts, fmt.Sprintf("%.1f%% of requests succeeded", 100*c.SuccessRate))
	}
	return lead + ", " + strings.Join(parts, "; ") + "."
}

// sentenceCase lowers a name's first letter for the middle of a sentence,
// leaving acronyms (TTFT) as they are.
func sentenceCase(s string) string {
	if len(s) > 1 && strings.ToUpper(s[:2]) == s[:2] {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// useCaseCharts draw the use case's latency (left axis) and speed (right axis)
// against concurrency, as the reference reports' dual-axis charts, with the
// thresholds dashed and the limit dotted; an ITL threshold gets its own.
func (r *Report) useCaseCharts(u UseCase, l Limit, cells []*Cell) []Chart {
	line := func(g gauge, right bool) Series {
		s := Series{Name: u.Statistic + " " + g.name + " (" + g.unit + ")", Right: right}
		for _, c := range cells {
			s.Points = append(s.Points, [2]float64{float64(c.Concurrency), g.scale * c.Stats[g.metric].Get(u.Statistic)})
			ci := 0.0
			if u.Statistic == "mean" {
				ci, _ = c.interval(g.metric, g.scale)
			}
			s.Err = append(s.Err, ci)
		}
		return s
	}
	rule := func(g gauge, right bool) []Rule {
		if g.threshold <= 0 {
			return nil
		}
		return []Rule{{At: g.scale * g.threshold, Label: "threshold " + g.format(g.threshold), Right: right}}
	}
	main := Chart{ID: "capacity-" + u.Name, Title: fmt.Sprintf("%s: latency and generation speed by concurrency at %d context, %d output tokens", u.Name, u.Context, u.Output),
		XLabel: "concurrent requests", YLabel: "latency (s)", YLabel2: "generation speed (tok/s)"}
	var out []Chart
	for _, g := range u.gauges() {
		switch g.metric {
		case "ttft_s", "e2e_s":
			main.Series = append(main.Series, line(g, false))
			main.HRules = append(main.HRules, rule(g, false)...)
		case "decode_tps":
			main.Series = append(main.Series, line(g, true))
			main.HRules = append(main.HRules, rule(g, true)...)
		case "itl_s":
			out = append(out, Chart{ID: "capacity-" + u.Name + "-itl", Title: fmt.Sprintf("%s: inter-token latency by concurrency", u.Name),
				XLabel: "concurrent requests", YLabel: "ITL (ms)", Series: []Series{line(g, false)}, HRules: rule(g, false)})
		}
	}
	out = append([]Chart{main}, out...)
	if l.Tested > 0 && !l.Capped && l.Capacity > 0 {
		for i := range out {
			out[i].VRules = []Rule{{At: l.Capacity, Label: fmt.Sprintf("limit %.1f", l.Capacity)}}
		}
	}
	return out
}
