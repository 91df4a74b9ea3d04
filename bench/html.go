package bench

import (
	"embed"
	"fmt"
	"html/template"
	"io"
)

//go:embed templates/report.html
var templates embed.FS

var reportHTML = template.Must(template.New("report.html").Funcs(template.FuncMap{
	"units": Units,
	"pct":   func(v float64) float64 { return 100 * v },
}).ParseFS(templates, "templates/report.html"))

// Section is a part of the HTML report; one without charts is listed in the
// contents and laid out by the template itself.
type Section struct {
	ID, Title, Text string
	Charts          []Chart
}

type guidanceRow struct {
	UseCase
	TTFT, Speed, Limit, Breach string
}

// chartOf draws a column over concurrency, one series per context length.
func (r *Report) chartOf(col Column, mode string) Chart {
	ch := Chart{ID: mode + "-" + col.Name, Title: fmt.Sprintf("%s (%s) by concurrency, one line per context length", col.Title, col.Unit),
		XLabel: "concurrent requests", YLabel: col.Title + " (" + col.Unit + ")"}
	if mode == "burst" {
		ch.Title = fmt.Sprintf("%s (%s) by burst size (queue depth), one line per context length", col.Title, col.Unit)
		ch.XLabel = "requests sent at once"
	}
	for _, ctx := range r.contexts() {
		s := Series{Name: fmt.Sprintf("%dK context", ctx/1024)}
		if ctx < 1024 {
			s.Name = fmt.Sprintf("%d context", ctx)
		}
		for _, c := range r.ladder(mode, ctx, r.Plan.Output) {
			if v, ok := col.Value(c); ok {
				s.Points = append(s.Points, [2]float64{float64(c.Concurrency), v})
			}
		}
		if len(s.Points) > 0 {
			ch.Series = append(ch.Series, s)
		}
	}
	return ch
}

// capacityCharts draw each threshold of a use case against its ladder, with
// the threshold and the limit marked.
func (r *Report) capacityCharts(u UseCase) []Chart {
	l, _ := r.limitFor(u.Name)
	cells := r.ladder("closed", u.Context, u.Output)
	var out []Chart
	add := func(metric, title, unit string, threshold, scale float64) {
		if threshold <= 0 || len(cells) == 0 {
			return
		}
		s := Series{Name: u.Statistic + " " + title}
		for _, c := range cells {
			s.Points = append(s.Points, [2]float64{float64(c.Concurrency), scale * c.Stats[metric].Get(u.Statistic)})
		}
		ch := Chart{ID: "capacity-" + u.Name + "-" + metric, Title: fmt.Sprintf("%s: %s (%s) at %d context, %d output tokens", u.Name, title, unit, u.Context, u.Output),
			XLabel: "concurrent requests", YLabel: title + " (" + unit + ")", Series: []Series{s},
			HRules: []Rule{{At: scale * threshold, Label: fmt.Sprintf("threshold %g %s", scale*threshold, unit)}}}
		if l.Tested > 0 && !l.Capped && l.Capacity > 0 {
			ch.VRules = []Rule{{At: l.Capacity, Label: fmt.Sprintf("limit %.1f", l.Capacity)}}
		}
		out = append(out, ch)
	}
	add("ttft_s", "TTFT", "s", u.TTFTMax, 1)
	add("e2e_s", "E2E", "s", u.E2EMax, 1)
	add("decode_tps", "generation speed", "tok/s", u.DecodeMin, 1)
	add("itl_s", "ITL", "ms", u.ITLMax, 1000)
	return out
}

// Sections lays out the HTML report in the reference reports' order.
func (r *Report) Sections() []Section {
	out := []Section{{ID: "findings", Title: "Key findings"}, {ID: "guidance", Title: "Use case guidance"}}
	column := func(name string) Column {
		for _, c := range Columns {
			if c.Name == name {
				return c
			}
		}
		panic("bench: no column " + name)
	}
	perf := func(name, text string) {
		col := column(name)
		if r.Has(col, "closed") {
			out = append(out, Section{ID: name, Title: col.Title, Text: text, Charts: []Chart{r.chartOf(col, "closed")}})
		}
	}
	perf("throughput", "Output tokens per second across all concurrent requests; prompt tokens are excluded.")
	perf("decode", "The speed at which text streams into each user's response.")
	perf("ttft", "Time from request sent to first token: queue wait plus prefill.")
	capacity := Section{ID: "capacity", Title: "Capacity analysis",
		Text: "Each use case's statistic against its thresholds at its context length; the dotted line marks the limit."}
	for _, u := range r.Plan.UseCases {
		capacity.Charts = append(capacity.Charts, r.capacityCharts(u)...)
	}
	out = append(out, capacity)
	perf("queue", "Mean time requests waited in the server's queue, from its own metrics.")
	perf("prefill", "Prompt tokens per second of TTFT, as each user sees it.")
	perf("itl", "Mean time between output tokens.")
	perf("efficiency", "System throughput over single-request throughput times concurrency.")
	perf("power", "Mean GPU power over each cell.")
	perf("energy", "GPU energy per output token.")
	if len(r.levels("burst")) > 0 {
		bursts := Section{ID: "bursts", Title: "Burst load (queue depth)", Text: "Requests sent at once, nothing after."}
		for _, name := range []string{"ttft", "decode", "itl"} {
			bursts.Charts = append(bursts.Charts, r.chartOf(column(name), "burst"))
		}
		out = append(out, bursts)
	}
	return out
}

// WriteHTML writes the self-contained HTML report.
func (r *Report) WriteHTML(w io.Writer) error {
	var rows []guidanceRow
	for _, u := range r.Plan.UseCases {
		l, _ := r.limitFor(u.Name)
		ttft, speed := u.Threshold()
		rows = append(rows, guidanceRow{UseCase: u, TTFT: ttft, Speed: speed, Limit: l.String(), Breach: l.Breach})
	}
	return reportHTML.Execute(w, map[string]any{"Report": r, "Findings": r.Findings(), "Guidance": rows, "Sections": r.Sections()})
}
