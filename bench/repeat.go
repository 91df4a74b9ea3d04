package bench

import (
	"fmt"
	"math"
	"slices"
)

// view is the cells the report shows: one per key, each pooling its runs.
func (r *Report) view() []Cell {
	if r.pooled == nil && len(r.Cells) > 0 {
		r.Derive()
	}
	return r.pooled
}

// pool merges the runs of each cell: their requests and failures together,
// durations and energy added (so throughput and power are over all runs),
// with the 95% confidence interval of each figure's mean over the runs.
func pool(cells []Cell) []Cell {
	var out []Cell
	index := map[Key]int{}
	runs := map[Key][]*Cell{}
	for i := range cells {
		k := cells[i].Key
		k.Run = 0
		if _, ok := index[k]; !ok {
			index[k] = len(out)
			out = append(out, Cell{Key: k})
		}
		runs[k] = append(runs[k], &cells[i])
	}
	for i := range out {
		out[i] = merge(out[i].Key, runs[out[i].Key])
	}
	return out
}

func merge(k Key, runs []*Cell) Cell {
	c := Cell{Key: k, Runs: len(runs)}
	var queue []float64
	energy, energyKnown := 0.0, true
	for _, run := range runs {
		c.Requests = append(c.Requests, run.Requests...)
		for o, n := range run.Failures {
			if c.Failures == nil {
				c.Failures, c.Errors = map[string]int{}, map[string]string{}
			}
			c.Failures[o] += n
			if _, ok := c.Errors[o]; !ok {
				c.Errors[o] = run.Errors[o]
			}
		}
		c.Duration += run.Duration
		if run.Queue != nil {
			queue = append(queue, *run.Queue)
		}
		if run.Energy != nil {
			energy += *run.Energy
		} else {
			energyKnown = false
		}
		if run.Rate != nil {
			if c.Rate == nil {
				c.Rate = &RateStats{Asked: run.Rate.Asked}
			}
			n := float64(len(runs))
			c.Rate.Achieved += run.Rate.Achieved / n
			c.Rate.InFlightMean += run.Rate.InFlightMean / n
			c.Rate.InFlightMax = max(c.Rate.InFlightMax, run.Rate.InFlightMax)
		}
	}
	if len(queue) > 0 {
		q := mean(queue)
		c.Queue = &q
	}
	if energyKnown {
		c.Energy = &energy
	}
	c.summarise()
	if len(runs) > 1 {
		c.CI = map[string]float64{}
		for _, m := range Metrics {
			var means []float64
			for _, run := range runs {
				if len(run.Requests) > 0 {
					means = append(means, run.Stats[m.Name].Mean)
				}
			}
			c.CI[m.Name] = ci95(means)
		}
		var tput []float64
		for _, run := range runs {
			tput = append(tput, run.Throughput)
		}
		c.CI["throughput_tps"] = ci95(tput)
	}
	return c
}

// runs splits a repeated report into one report per run, for the spread of
// what each run alone concludes; nil when the cells were measured once.
func (r *Report) runs() []*Report {
	var ids []int
	for _, c := range r.Cells {
		if !slices.Contains(ids, c.Run) {
			ids = append(ids, c.Run)
		}
	}
	if len(ids) < 2 {
		return nil
	}
	slices.Sort(ids)
	out := make([]*Report, len(ids))
	for i, id := range ids {
		run := &Report{Plan: r.Plan}
		for _, c := range r.Cells {
			if c.Run == id {
				c.Run = 0
				run.Cells = append(run.Cells, c)
			}
		}
		run.pooled = pool(run.Cells)
		out[i] = run
	}
	return out
}

func mean(vs []float64) float64 {
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

// tQuantile975 is Student's t at 97.5% by degrees of freedom (1-30): the
// 95% interval of a mean of few runs is wider than 1.96 standard errors.
var tQuantile975 = []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// ci95 is the half-width of the 95% confidence interval of the mean of vs;
// NaN with fewer than two values.
func ci95(vs []float64) float64 {
	n := len(vs)
	if n < 2 {
		return math.NaN()
	}
	m := mean(vs)
	ss := 0.0
	for _, v := range vs {
		ss += (v - m) * (v - m)
	}
	t := 1.96
	if n-1 <= len(tQuantile975) {
		t = tQuantile975[n-2]
	}
	return t * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
}

// interval is the half-width of the 95% interval of a figure's mean (a
// metric's, or throughput_tps) in the figure's unit (scale); false when the
// cell pools no repeated runs.
func (c *Cell) interval(figure string, scale float64) (float64, bool) {
	ci, ok := c.CI[figure]
	if !ok || math.IsNaN(ci) {
		return 0, false
	}
	return ci * scale, true
}

// withCI prints a figure's text with its interval when it has one.
func (c *Cell) withCI(text, figure string, scale float64) string {
	if ci, ok := c.interval(figure, scale); ok {
		return fmt.Sprintf("%s ± %.3g", text, ci)
	}
	return text
}
