package bench

import (
	"cmp"
	"embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
)

//go:embed templates/compare.html
var compareFS embed.FS

var compareHTML = template.Must(template.New("compare.html").ParseFS(compareFS, "templates/compare.html"))

// Comparison sets two runs side by side: before and after a change of the
// server's configuration, or two servers.
type Comparison struct {
	A, B           *Report
	LabelA, LabelB string
}

// comparedRow is one figure of both runs and how B differs from A.
type comparedRow struct {
	Name, A, B, Change string
	Better             bool // B is better than A by more than 1%
	Worse              bool
}

// change prints B's change from A; higher says whether a higher value is better.
func change(a, b float64, higher bool) (text string, better, worse bool) {
	if !(a > 0) || math.IsNaN(b) {
		return "-", false, false
	}
	d := (b - a) / a
	if !higher {
		d = -d
	}
	return fmt.Sprintf("%+.1f%%", 100*(b-a)/a), d > 0.01, d < -0.01
}

// limits compares each use case both runs measured.
func (c Comparison) limits() []comparedRow {
	var out []comparedRow
	for _, la := range c.A.Limits {
		lb, ok := c.B.limitFor(la.UseCase)
		if !ok {
			continue
		}
		row := comparedRow{Name: la.UseCase, A: la.String(), B: lb.String()}
		if la.Tested > 0 && lb.Tested > 0 && la.Failed == "" && lb.Failed == "" {
			row.Change, row.Better, row.Worse = change(la.Capacity, lb.Capacity, true)
		}
		out = append(out, row)
	}
	return out
}

// findings compares the key findings.
func (c Comparison) findings() []comparedRow {
	fa, fb := c.A.Findings(), c.B.Findings()
	row := func(name string, a, b float64, unit string, higher bool) comparedRow {
		r := comparedRow{Name: name, A: Units(a, unit), B: Units(b, unit)}
		r.Change, r.Better, r.Worse = change(a, b, higher)
		return r
	}
	out := []comparedRow{
		row("Peak system throughput", fa.PeakThroughput, fb.PeakThroughput, "tok/s", true),
		row(fmt.Sprintf("TTFT, one request, %s context", ctxName(fa.ShortCtx)), fa.TTFTShort, fb.TTFTShort, "s", false),
	}
	if fa.LongCtx != fa.ShortCtx { // one context: the same row twice
		out = append(out, row(fmt.Sprintf("TTFT, one request, %s context", ctxName(fa.LongCtx)), fa.TTFTLong, fb.TTFTLong, "s", false))
	}
	return append(out,
		row("Generation speed, one request", fa.DecodeShort, fb.DecodeShort, "tok/s", true),
		row("Success rate", 100*fa.SuccessRate(), 100*fb.SuccessRate(), "%", true))
}

// cells compares the cells both runs measured, by key.
func (c Comparison) cells() []comparedRow {
	var out []comparedRow
	for _, ca := range c.A.view() {
		cb, ok := c.B.Cell(ca.Key)
		if !ok {
			continue
		}
		for _, f := range []struct {
			col    string
			higher bool
		}{{"ttft", false}, {"decode", true}, {"throughput", true}} {
			col := column(f.col)
			va, okA := col.Value(&ca)
			vb, okB := col.Value(cb)
			if !okA || !okB {
				continue
			}
			r := comparedRow{Name: ca.Key.String() + ": " + col.Title, A: Units(va, col.Unit), B: Units(vb, col.Unit)}
			r.Change, r.Better, r.Worse = change(va, vb, f.higher)
			out = append(out, r)
		}
	}
	return out
}

// paretoCharts draw each run's closed-loop cells at its grid's output length
// as throughput against per-user speed and against TTFT, with the frontier
// of cells no other beats on both: the trade-off a configuration offers.
func (c Comparison) paretoCharts() []Chart {
	type axis struct {
		id, title, label, metric string
		higher                   bool
	}
	var out []Chart
	for _, y := range []axis{{"speed", "per-user generation speed", "generation speed (tok/s)", "decode_tps", true},
		{"ttft", "time to first token", "TTFT (s)", "ttft_s", false}} {
		ch := Chart{ID: "pareto-" + y.id, Title: fmt.Sprintf("System throughput against %s, every closed-loop cell; lines join each run's Pareto frontier", y.title),
			XLabel: "system throughput (tok/s)", YLabel: y.label}
		for i, run := range []struct {
			label string
			r     *Report
		}{{c.LabelA, c.A}, {c.LabelB, c.B}} {
			var pts [][2]float64
			for _, cell := range run.r.view() {
				if cell.Mode == "closed" && cell.Output == run.r.Plan.Output && len(cell.Requests) > 0 {
					pts = append(pts, [2]float64{cell.Throughput, cell.Stats[y.metric].Mean})
				}
			}
			col := Palette[i]
			ch.Series = append(ch.Series, Series{Name: run.label + ": cells", Points: pts, Scatter: true, Color: col},
				Series{Name: run.label + ": frontier", Points: frontier(pts, y.higher), Color: col})
		}
		out = append(out, ch)
	}
	return out
}

// frontier keeps the points no other point beats on both throughput (x,
// higher is better) and y (higher or lower better), ordered by x.
func frontier(pts [][2]float64, higher bool) [][2]float64 {
	better := func(a, b float64) bool {
		if higher {
			return a > b
		}
		return a < b
	}
	sorted := slices.Clone(pts)
	// By throughput, best first; a point joins when its y beats every point
	// of higher throughput.
	slices.SortFunc(sorted, func(a, b [2]float64) int { return cmp.Compare(b[0], a[0]) })
	var out [][2]float64
	for _, p := range sorted {
		if len(out) == 0 || better(p[1], out[len(out)-1][1]) {
			out = append(out, p)
		}
	}
	slices.Reverse(out)
	return out
}

// WriteHTML writes the self-contained comparison page.
func (c Comparison) WriteHTML(w io.Writer) error {
	return compareHTML.Execute(w, map[string]any{"C": c, "Limits": c.limits(), "Findings": c.findings(), "Cells": c.cells(), "Charts": c.paretoCharts()})
}

// WriteMarkdown writes the comparison's tables as Markdown, for a pull
// request or a ticket: the runs, capacity by use case, key findings and
// every cell both measured, each with B's change from A. Every text passes
// through md: labels, model ids and URLs are outside text.
func (c Comparison) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark comparison\n\nA: %s. B: %s. B's change from A; better or worse by more than 1%% is marked.\n\n", md(c.LabelA), md(c.LabelB))
	fmt.Fprintf(&b, "| | A: %s | B: %s |\n|---|---|---|\n", md(c.LabelA), md(c.LabelB))
	hw := func(r *Report) string {
		if r.Hardware == nil {
			return "not reported"
		}
		return r.Hardware.String()
	}
	fmt.Fprintf(&b, "| Server | %s | %s |\n| Hardware | %s | %s |\n", md(c.A.Header()), md(c.B.Header()), md(hw(c.A)), md(hw(c.B)))
	fmt.Fprintf(&b, "| Measured | %s, headroom %s | %s, headroom %s |\n", c.A.Updated.Format("2006-01-02 15:04 UTC"), md(c.A.Tool), c.B.Updated.Format("2006-01-02 15:04 UTC"), md(c.B.Tool))
	if c.A.TimeScale != c.B.TimeScale {
		fmt.Fprintf(&b, "\nThe runs are at different time scales (%g and %g): compare with care.\n", c.A.TimeScale, c.B.TimeScale)
	}
	table := func(title, first string, rows []comparedRow) {
		fmt.Fprintf(&b, "\n## %s\n\n| %s | A | B | change |\n|---|---|---|---|\n", title, first)
		for _, r := range rows {
			mark := ""
			switch {
			case r.Better:
				mark = " (better)"
			case r.Worse:
				mark = " (worse)"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s%s |\n", md(r.Name), md(r.A), md(r.B), md(r.Change), mark)
		}
	}
	table("Capacity by use case", "use case", c.limits())
	table("Key findings", "finding", c.findings())
	table("Cells both runs measured", "cell and figure", c.cells())
	_, err := io.WriteString(w, b.String())
	return err
}
