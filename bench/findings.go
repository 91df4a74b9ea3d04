package bench

import (
	"fmt"
	"slices"
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
}

// Findings computes the key findings from the grid's closed-loop cells.
func (r *Report) Findings() Findings {
	var f Findings
	for i := range r.Cells {
		c := &r.Cells[i]
		f.Requests += len(c.Requests)
		for _, n := range c.Failures {
			f.Failed += n
		}
		if c.Mode == "closed" && c.Output == r.Plan.Output && c.Throughput > f.PeakThroughput {
			f.PeakThroughput, f.PeakAt = c.Throughput, c.Key
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

// SuccessRate is the share of requests that succeeded, over all cells.
func (f Findings) SuccessRate() float64 {
	if f.Requests == 0 {
		return 0
	}
	return 1 - float64(f.Failed)/float64(f.Requests)
}

// contexts are the grid's measured context lengths, ascending.
func (r *Report) contexts() []int {
	var out []int
	for _, c := range r.Cells {
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
	for _, c := range r.Cells {
		if c.Mode == mode && c.Output == r.Plan.Output && !slices.Contains(out, c.Concurrency) {
			out = append(out, c.Concurrency)
		}
	}
	slices.Sort(out)
	return out
}

// Column is one per-cell figure the tables and charts show.
type Column struct {
	Name, Title, Unit string
	Value             func(*Cell) (float64, bool)
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
	{"throughput", "System throughput", "tok/s", func(c *Cell) (float64, bool) { return c.Throughput, c.Throughput > 0 }},
	{"decode", "Per-user generation speed", "tok/s", stat("decode_tps")},
	{"ttft", "Time to first token", "s", stat("ttft_s")},
	{"queue", "Queue wait", "s", optional(func(c *Cell) *float64 { return c.Queue })},
	{"prefill", "Per-user prefill speed", "tok/s", stat("prefill_tps")},
	{"itl", "Inter-token latency", "ms", func(c *Cell) (float64, bool) { return 1000 * c.Stats["itl_s"].Mean, len(c.Requests) > 0 }},
	{"efficiency", "Scaling efficiency", "%", func(c *Cell) (float64, bool) { return 100 * c.Efficiency, c.Efficiency > 0 }},
	{"power", "GPU power", "W", optional(func(c *Cell) *float64 { return c.Watts })},
	{"energy", "Energy per output token", "J", optional(func(c *Cell) *float64 { return c.JoulesPerToken })},
}

// Has reports whether any cell of the mode has the column's figure.
func (r *Report) Has(col Column, mode string) bool {
	for i := range r.Cells {
		if _, ok := col.Value(&r.Cells[i]); ok && r.Cells[i].Mode == mode {
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
