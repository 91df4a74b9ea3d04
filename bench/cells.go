package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// MinSamples is the fewest requests a cell's percentile is read from before
// the report marks it as indicative: a p99 of 2 samples is their maximum.
const MinSamples = 20

// cellTable is one mode's cells with their statistics, for the HTML report.
type cellTable struct {
	Title string
	Head  []string
	Rows  [][]tableValue
}

type tableValue struct {
	Text       string
	Indicative bool // a percentile from fewer than MinSamples requests
}

// cellTables list every cell, closed loop then bursts, with each metric's
// mean and percentiles.
func (r *Report) cellTables() []cellTable {
	type stat struct {
		metric, head, unit string
		scale              float64
		stats              []string
	}
	cols := []stat{
		{"ttft_s", "TTFT", "s", 1, []string{"mean", "p50", "p90", "p99"}},
		{"itl_s", "ITL", "ms", 1000, []string{"mean", "p50", "p99"}},
		{"decode_tps", "speed", "tok/s", 1, []string{"mean", "p50"}},
		{"e2e_s", "E2E", "s", 1, []string{"mean", "p50", "p99"}},
		{"prefill_tps", "prefill", "tok/s", 1, []string{"mean"}},
	}
	head := []string{"context", "output", "load", "requests", "success", "throughput (tok/s)"}
	for _, c := range cols {
		for _, s := range c.stats {
			head = append(head, fmt.Sprintf("%s %s (%s)", c.head, s, c.unit))
		}
	}
	head = append(head, "queue wait (s)", "power (W)")
	var out []cellTable
	for _, mode := range []struct{ mode, title string }{{"closed", "Closed loop"}, {"burst", "Bursts"}, {"rate", "Open loop"}} {
		var cells []*Cell
		view := r.view()
		for i := range view {
			if view[i].Mode == mode.mode {
				cells = append(cells, &view[i])
			}
		}
		if len(cells) == 0 {
			continue
		}
		slices.SortFunc(cells, func(a, b *Cell) int {
			if a.Context != b.Context {
				return a.Context - b.Context
			}
			if a.Output != b.Output {
				return a.Output - b.Output
			}
			return cmp.Compare(a.X(), b.X())
		})
		t := cellTable{Title: mode.title, Head: head}
		for _, c := range cells {
			row := []tableValue{{Text: strconv.Itoa(c.Context)}, {Text: strconv.Itoa(c.Output)}, {Text: c.load()},
				{Text: strconv.Itoa(len(c.Requests))}, {Text: fmt.Sprintf("%.1f%%", 100*c.SuccessRate)}, {Text: c.withCI(fmt.Sprintf("%.1f", c.Throughput), "throughput_tps", 1)}}
			few := len(c.Requests) < MinSamples
			for _, col := range cols {
				for _, s := range col.stats {
					text := strconv.FormatFloat(col.scale*c.Stats[col.metric].Get(s), 'f', 3, 64)
					if s == "mean" {
						text = c.withCI(text, col.metric, col.scale)
					}
					row = append(row, tableValue{Text: text, Indicative: few && s != "mean"})
				}
			}
			row = append(row, optValue(c.Queue), optValue(c.Watts))
			t.Rows = append(t.Rows, row)
		}
		out = append(out, t)
	}
	return out
}

// load is the cell's load as the tables print it: n=4, or 2.5/s.
func (k Key) load() string {
	if k.Mode == "rate" {
		return fmt.Sprintf("%g/s", k.Rate)
	}
	return fmt.Sprintf("n=%d", k.Concurrency)
}

func optValue(v *float64) tableValue {
	if v == nil {
		return tableValue{Text: "-"}
	}
	return tableValue{Text: strconv.FormatFloat(*v, 'f', 3, 64)}
}
