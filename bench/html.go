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

// Section is a part of the HTML report, listed in its contents. Kind says how
// the template lays it out: "charts" (its text and charts), "usecase" (a use
// case's capacity analysis), or the name of a section the template writes itself.
type Section struct {
	ID, Title, Text, Kind string
	Sub                   bool // a subsection: indented in the contents, an h3
	Charts                []Chart
	UseCase               *useCaseView
}

type guidanceRow struct {
	UseCase
	TTFT, Speed, Limit, Breach string
}

// chartOf draws a column over concurrency, one series per context length.
func (r *Report) chartOf(col Column, mode string) Chart {
	ch := Chart{ID: mode + "-" + col.Name, Title: fmt.Sprintf("%s (%s) by concurrency, one line per context length", col.Title, col.Unit),
		XLabel: "concurrent requests", YLabel: col.Title + " (" + col.Unit + ")"}
	switch mode {
	case "burst":
		ch.Title = fmt.Sprintf("%s (%s) by burst size (queue depth), one line per context length", col.Title, col.Unit)
		ch.XLabel = "requests sent at once"
	case "rate":
		ch.Title = fmt.Sprintf("%s (%s) by request rate (open loop), one line per context length", col.Title, col.Unit)
		ch.XLabel = "requests per second"
	}
	for _, ctx := range r.contexts() {
		s := Series{Name: ctxName(ctx) + " context"}
		for _, c := range r.ladder(mode, ctx, r.Plan.Output) {
			if v, ok := col.Value(c); ok {
				s.Points = append(s.Points, [2]float64{c.X(), v})
				s.Err = append(s.Err, col.ci(c))
			}
		}
		if len(s.Points) > 0 {
			ch.Series = append(ch.Series, s)
		}
	}
	return ch
}

func column(name string) Column {
	for _, c := range Columns {
		if c.Name == name {
			return c
		}
	}
	panic("bench: no column " + name)
}

// Sections lays out the HTML report in the reference reports' order:
// findings and guidance, the performance charts, each use case's capacity,
// the technical analysis, bursts, then the per-cell data, a glossary and the
// methodology.
func (r *Report) Sections() []Section {
	out := []Section{{ID: "findings", Title: "Key findings", Kind: "findings"}, {ID: "guidance", Title: "Use case guidance", Kind: "guidance"}}
	perf := func(name, text string) {
		if col := column(name); r.Has(col, "closed") {
			out = append(out, Section{ID: name, Title: col.Title, Text: text, Kind: "charts", Charts: []Chart{r.chartOf(col, "closed")}})
		}
	}
	perf("throughput", "Output tokens per second across all concurrent requests; prompt tokens are excluded.")
	perf("decode", "The speed at which text streams into each user's response: output tokens after the first, over the time they took.")
	perf("ttft", "Time from request sent to first token: queue wait plus prefill.")
	out = append(out, Section{ID: "capacity", Title: "Capacity analysis", Kind: "text",
		Text: "Each use case at its own context and output length, as concurrency rises. Dashed lines are its thresholds; the dotted line is the capacity limit, where the first threshold is crossed."})
	for _, u := range r.Plan.UseCases {
		v := r.useCaseView(u)
		out = append(out, Section{ID: "capacity-" + u.Name, Title: fmt.Sprintf("%s (%s context, %d output tokens)", u.Name, ctxName(u.Context), u.Output),
			Kind: "usecase", Sub: true, Charts: v.Charts, UseCase: &v})
	}
	perf("queue", "Mean time requests waited in the server's queue before their prefill, from its own metrics. It is part of TTFT.")
	perf("prefill", "Prompt tokens per second of TTFT, as each user sees it: the context over the wait for the first token.")
	perf("itl", "Mean time between output tokens: how smoothly a response streams.")
	perf("efficiency", "System throughput over single-request throughput times concurrency: 100% is linear scaling.")
	perf("power", "Mean GPU power over each cell, all the server's GPUs together.")
	perf("energy", "GPU energy per output token.")
	if len(r.levels("burst")) > 0 {
		bursts := Section{ID: "bursts", Title: "Burst load (queue depth)", Kind: "charts", Text: "Requests sent at once, nothing after: how the server takes a sudden queue."}
		for _, name := range []string{"ttft", "decode", "itl"} {
			bursts.Charts = append(bursts.Charts, r.chartOf(column(name), "burst"))
		}
		out = append(out, bursts)
	}
	if len(r.SafeQueue) > 0 {
		out = append(out, Section{ID: "safe-queue", Title: "Max safe queue depth", Kind: "safe-queue"})
	}
	if len(r.rateRows()) > 0 {
		rate := Section{ID: "rate", Title: "Open-loop arrivals (request rate)", Kind: "rate",
			Text: fmt.Sprintf("Requests sent at a rate (%s arrivals) whatever the server's state, as users arrive in production: the requests in flight are the server's answer.", r.Plan.Arrival)}
		for _, name := range []string{"ttft", "decode", "throughput"} {
			rate.Charts = append(rate.Charts, r.chartOf(column(name), "rate"))
		}
		out = append(out, rate)
	}
	return append(out,
		Section{ID: "cells", Title: "Per-cell data", Kind: "cells"},
		Section{ID: "glossary", Title: "Glossary", Kind: "glossary"},
		Section{ID: "methodology", Title: "Methodology and test parameters", Kind: "methodology"})
}

// WriteHTML writes the self-contained HTML report.
func (r *Report) WriteHTML(w io.Writer) error {
	var rows []guidanceRow
	for _, u := range r.Plan.UseCases {
		l, _ := r.limitFor(u.Name)
		ttft, speed := u.Threshold()
		rows = append(rows, guidanceRow{UseCase: u, TTFT: ttft, Speed: speed, Limit: l.String(), Breach: l.Breach})
	}
	return reportHTML.Execute(w, map[string]any{"Report": r, "Findings": r.Findings(), "Highlights": r.Highlights(), "Guidance": rows,
		"Sections": r.Sections(), "Cells": r.cellTables(), "Rates": r.rateRows(), "Glossary": Glossary, "Method": r.Methodology(), "MinSamples": MinSamples})
}
