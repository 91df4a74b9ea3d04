package bench

import (
	"fmt"
	"slices"
	"strconv"
)

// Findings are the key findings of a report, as the reference reports open with.
type Findings struct {
	PeakThroughput   float64
	PeakAt           Key
	TTFTShort        float64 // single request, shortest context
	TTFTLong         float64 // single request, longest context
	DecodeShort      float64
	DecodeLong       float64
	ShortCtx         int
	LongCtx          int
	Scaling          float64 // peak throughput over single-request throughput at the peak's context
	Requests, Failed int
	PeakWatts        float64 // highest mean GPU power of a cell; 0: no power source
	PeakWattsAt      Key
}

// Findings computes the key findings from the grid's closed-loop cells.
func (r *Report) Findings() Findings {
	var f Findings
	view := r.view()
	for i := range view {
		c := &view[i]
		f.Requests += len(c.Requests)
		for _, n := range c.Failures {
			f.Failed += n
		}
		if c.Mode == "closed" && c.Output == r.Plan.Output && c.Throughput > f.PeakThroughput {
			f.PeakThroughput, f.PeakAt = c.Throughput, c.Key
		}
		if c.Watts != nil && *c.Watts > f.PeakWatts {
			f.PeakWatts, f.PeakWattsAt = *c.Watts, c.Key
		}
	}
	f.Requests += f.Failed
	ctxs := r.contexts()
	if len(ctxs) == 0 {
		return f
	}
	f.ShortCtx, f.LongCtx = ctxs[0], ctxs[len(ctxs)-1]
	single := func(ctx int) (*Cell, bool) {
		return r.Cell(Key{Mode: "closed", Context: ctx, Output: r.Plan.Output, Concurrency: 1})
	}
	if c, ok := single(f.ShortCtx); ok {
		f.TTFTShort, f.DecodeShort = c.Stats["ttft_s"].Mean, c.Stats["decode_tps"].Mean
	}
	if c, ok := single(f.LongCtx); ok {
		f.TTFTLong, f.DecodeLong = c.Stats["ttft_s"].Mean, c.Stats["decode_tps"].Mean
	}
	if c, ok := single(f.PeakAt.Context); ok && c.Throughput > 0 {
		f.Scaling = f.PeakThroughput / c.Throughput
	}
	return f
}

// TTFTText is the single-request TTFT from the shortest context to the
// longest, or at the one context a sweep measured.
func (f Findings) TTFTText() string {
	return f.span(Units(f.TTFTShort, "s"), Units(f.TTFTLong, "s"))
}

// DecodeText is the single-request generation speed the same way.
func (f Findings) DecodeText() string {
	return f.span(fmt.Sprintf("%.1f tok/s", f.DecodeShort), fmt.Sprintf("%.1f tok/s", f.DecodeLong))
}

// span reads "a (8192 context) → b (32768 context)", or "a at 8192
// context" when the sweep has one context: a change from a value to
// itself says nothing.
func (f Findings) span(short, long string) string {
	if f.ShortCtx == f.LongCtx {
		return fmt.Sprintf("%s at %d context", short, f.ShortCtx)
	}
	return fmt.Sprintf("%s (%d context) → %s (%d context)", short, f.ShortCtx, long, f.LongCtx)
}

// SuccessRate is the share of requests that succeeded, over all cells.
func (f Findings) SuccessRate() float64 {
	if f.Requests == 0 {
		return 0
	}
	return 1 - float64(f.Failed)/float64(f.Requests)
}

// Highlight is one of the cards a report opens with.
type Highlight struct {
	Value, Label, Detail string
}

// Highlights are the reference reports' opening cards: peak throughput, the
// success rate, the concurrent requests of the report's chatbot (or middle)
// use case, tokens per hour, and energy and cost per hour where power was read.
func (r *Report) Highlights() []Highlight {
	f := r.Findings()
	out := []Highlight{
		{fmt.Sprintf("%.1f tok/s", f.PeakThroughput), "Peak system throughput", fmt.Sprintf("@ %d concurrent requests, %s context", f.PeakAt.Concurrency, ctxName(f.PeakAt.Context))},
		{fmt.Sprintf("%.1f%%", 100*f.SuccessRate()), "Success rate", fmt.Sprintf("across %d requests", f.Requests)},
	}
	if u, ok := r.headlineUseCase(); ok {
		l, _ := r.limitFor(u.Name)
		out = append(out, Highlight{l.String(), "Concurrent requests", fmt.Sprintf("@ %s context (%s)", ctxName(u.Context), u.Name)})
	}
	out = append(out, Highlight{millions(3600 * f.PeakThroughput), "Output tokens per hour", "at peak throughput"})
	if f.PeakWatts > 0 {
		kwh := f.PeakWatts / 1000
		h := Highlight{fmt.Sprintf("%.2f kWh", kwh), "GPU energy per hour", fmt.Sprintf("at the highest mean power, %.0f W (%s)", f.PeakWatts, f.PeakWattsAt)}
		if r.EnergyPrice > 0 {
			h.Detail += fmt.Sprintf("; %.3f per hour at %.2f per kWh", kwh*r.EnergyPrice, r.EnergyPrice)
		}
		out = append(out, h)
	}
	return out
}

// headlineUseCase is the use case the highlights quote: the one named
// chatbot, as the reference reports do, else the middle one.
func (r *Report) headlineUseCase() (UseCase, bool) {
	us := r.Plan.UseCases
	if len(us) == 0 {
		return UseCase{}, false
	}
	for _, u := range us {
		if u.Name == "chatbot" {
			return u, true
		}
	}
	return us[len(us)/2], true
}

// ctxName prints a context length as the reports do: 32K, or 512.
func ctxName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return fmt.Sprint(n)
}

func millions(v float64) string {
	if v >= 1e6 {
		return fmt.Sprintf("%.1f million", v/1e6)
	}
	return fmt.Sprintf("%.0f", v)
}

// contexts are the grid's measured context lengths, ascending.
func (r *Report) contexts() []int {
	var out []int
	for _, c := range r.view() {
		if c.Mode == "closed" && c.Output == r.Plan.Output && !slices.Contains(out, c.Context) {
			out = append(out, c.Context)
		}
	}
	slices.Sort(out)
	return out
}

// levels are the concurrency levels measured in one mode at the grid's output length, ascending.
func (r *Report) levels(mode string) []int {
	var out []int
	for _, c := range r.view() {
		if c.Mode == mode && c.Output == r.Plan.Output && !slices.Contains(out, c.Concurrency) {
			out = append(out, c.Concurrency)
		}
	}
	slices.Sort(out)
	return out
}

// Column is one per-cell figure the tables and charts show. Metric names the
// figure's confidence interval in Cell.CI ("": none), Scale its unit's factor.
type Column struct {
	Name, Title, Unit string
	Value             func(*Cell) (float64, bool)
	Metric            string
	Scale             float64
}

// ci is the half-width of the figure's 95% interval in its unit, 0 when the
// cell pools no repeated runs.
func (col Column) ci(c *Cell) float64 {
	ci, _ := c.interval(col.Metric, col.Scale)
	return ci
}

// Text prints the column's figure for a cell, with its 95% interval when the
// cell pools repeated runs.
func (col Column) Text(c *Cell) (string, bool) {
	v, ok := col.Value(c)
	if !ok {
		return "", false
	}
	return c.withCI(strconv.FormatFloat(v, 'f', 3, 64), col.Metric, col.Scale), true
}

func stat(metric string) func(*Cell) (float64, bool) {
	return func(c *Cell) (float64, bool) { return c.Stats[metric].Mean, len(c.Requests) > 0 }
}

func optional(f func(*Cell) *float64) func(*Cell) (float64, bool) {
	return func(c *Cell) (float64, bool) {
		if v := f(c); v != nil {
			return *v, true
		}
		return 0, false
	}
}

// Columns are the report's per-cell figures, in the reference reports' order.
var Columns = []Column{
	{"throughput", "System throughput", "tok/s", func(c *Cell) (float64, bool) { return c.Throughput, c.Throughput > 0 }, "throughput_tps", 1},
	{"decode", "Per-user generation speed", "tok/s", stat("decode_tps"), "decode_tps", 1},
	{"ttft", "Time to first token", "s", stat("ttft_s"), "ttft_s", 1},
	{"queue", "Queue wait", "s", optional(func(c *Cell) *float64 { return c.Queue }), "", 1},
	{"prefill", "Per-user prefill speed", "tok/s", stat("prefill_tps"), "prefill_tps", 1},
	{"itl", "Inter-token latency", "ms", func(c *Cell) (float64, bool) { return 1000 * c.Stats["itl_s"].Mean, len(c.Requests) > 0 }, "itl_s", 1000},
	{"efficiency", "Scaling efficiency", "%", func(c *Cell) (float64, bool) { return 100 * c.Efficiency, c.Efficiency > 0 }, "", 1},
	{"power", "GPU power", "W", optional(func(c *Cell) *float64 { return c.Watts }), "", 1},
	{"energy", "Energy per output token", "J", optional(func(c *Cell) *float64 { return c.JoulesPerToken }), "", 1},
}

// Has reports whether any cell of the mode has the column's figure.
func (r *Report) Has(col Column, mode string) bool {
	view := r.view()
	for i := range view {
		if _, ok := col.Value(&view[i]); ok && view[i].Mode == mode {
			return true
		}
	}
	return false
}

// Units prints a value with its unit the way the tables do.
func Units(v float64, unit string) string {
	switch {
	case unit == "s" && v < 1:
		return fmt.Sprintf("%.0f ms", 1000*v)
	case unit == "s":
		return fmt.Sprintf("%.2f s", v)
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
