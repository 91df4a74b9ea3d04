package bench

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/headroom-dev/headroom/capacity"
)

// Limit is a use case's capacity: the concurrency at which its first
// threshold is crossed, interpolated between the tested levels around it.
type Limit struct {
	UseCase  string  `json:"use_case"`
	Capacity float64 `json:"capacity"`
	// Capped: no tested level breached a threshold; Capacity is the highest
	// tested level and the limit reads "N+".
	Capped bool `json:"capped,omitempty"`
	// Tested is the number of closed-loop cells behind the limit; 0: the use
	// case's context and output were not measured, Capacity is meaningless.
	Tested int `json:"tested"`
	// Breach says which threshold the first failing level crossed.
	Breach string `json:"breach,omitempty"`
	// Failed: no request of the first failing level succeeded; it says
	// how they failed. Such a level measured nothing, so it breaches no
	// threshold either.
	Failed string `json:"failed,omitempty"`
	// Runs are the capacities each run alone gives (Plan.Repeat > 1) and CI
	// the half-width of their mean's 95% confidence interval.
	Runs []float64 `json:"runs,omitempty"`
	CI   float64   `json:"ci95,omitempty"`
}

// String is the limit as the guidance table prints it.
func (l Limit) String() string {
	switch {
	case l.Tested == 0:
		return "not tested"
	case l.Failed != "":
		return "failed: " + l.Failed
	case l.Capped:
		return fmt.Sprintf("%.0f+", l.Capacity)
	case l.Capacity == 0 && len(l.Runs) == 0:
		return "none (a single request breaches)"
	case len(l.Runs) > 1:
		return fmt.Sprintf("%.1f ± %.1f (%d runs)", l.Capacity, l.CI, len(l.Runs))
	}
	return fmt.Sprintf("%.1f", l.Capacity)
}

// Depth is the max safe queue depth of bursts at one context length.
type Depth struct {
	Context int     `json:"context"`
	TTFTMax float64 `json:"ttft_max_s"`
	Depth   float64 `json:"depth"`
	Capped  bool    `json:"capped,omitempty"`
}

// Text is the depth as the tables print it: "N+" when no burst crossed.
func (d Depth) Text() string {
	if d.Capped {
		return fmt.Sprintf("%.0f+", d.Depth)
	}
	return fmt.Sprintf("%.1f", d.Depth)
}

// level is one tested concurrency and its margin.
type level struct {
	n      int
	margin float64
	cell   *Cell
}

// ladder returns the measured cells of one mode, context and output, by concurrency.
func (r *Report) ladder(mode string, context, output int) []*Cell {
	var out []*Cell
	view := r.view()
	for i := range view {
		c := &view[i]
		if c.Mode == mode && c.Context == context && c.Output == output {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Cell) int { return cmp.Compare(a.X(), b.X()) })
	return out
}

// firstCrossing walks levels upwards to the first failing one and
// interpolates between it and the passing level below (0 when the first fails).
func firstCrossing(levels []level) (limit float64, capped bool, failed *level) {
	lo, mLo := 0, 1.0
	for i := range levels {
		l := &levels[i]
		if l.margin < 0 {
			if lo == 0 {
				return 0, false, l
			}
			return capacity.Interpolate(lo, l.n, mLo, l.margin), false, l
		}
		lo, mLo = l.n, l.margin
	}
	return float64(lo), true, nil
}

// UseCaseLimit derives a use case's limit from the report's cells.
func (r *Report) UseCaseLimit(u UseCase) Limit {
	cells := r.ladder("closed", u.Context, u.Output)
	l := Limit{UseCase: u.Name, Tested: len(cells)}
	if len(cells) == 0 {
		return l
	}
	levels := make([]level, len(cells))
	for i, c := range cells {
		levels[i] = level{n: c.Concurrency, margin: u.Margin(c), cell: c}
	}
	var failed *level
	l.Capacity, l.Capped, failed = firstCrossing(levels)
	if failed != nil {
		if failed.cell.SuccessRate == 0 {
			l.Failed = fmt.Sprintf("at %d, every request failed: %s", failed.cell.Concurrency, failed.cell.failure())
		} else {
			l.Breach = u.breach(failed.cell)
		}
	}
	return l
}

// failure names a cell's failures with the first error of the most common.
func (c *Cell) failure() string {
	most := ""
	for o, n := range c.Failures {
		if most == "" || n > c.Failures[most] || n == c.Failures[most] && o < most {
			most = o
		}
	}
	if most == "" {
		return "no request was sent"
	}
	return fmt.Sprintf("%d %s: %s", c.Failures[most], most, c.Errors[most])
}

// Failed reports whether the sweep measured nothing: no request of any of
// its cells succeeded. Its error is the first cell's failure.
func (r *Report) Failed() (bool, string) {
	view := r.view()
	if len(view) == 0 {
		return false, ""
	}
	for i := range view {
		if view[i].SuccessRate > 0 {
			return false, ""
		}
	}
	return true, view[0].failure()
}

// breach names the thresholds a cell crosses.
func (u UseCase) breach(c *Cell) string {
	var out []string
	check := func(metric string, v, max float64, over bool) {
		if max > 0 && (over && v > max || !over && v < max) {
			out = append(out, fmt.Sprintf("%s %s %.3g (limit %.3g)", u.Statistic, metric, v, max))
		}
	}
	check("ttft_s", c.Stats["ttft_s"].Get(u.Statistic), u.TTFTMax, true)
	check("e2e_s", c.Stats["e2e_s"].Get(u.Statistic), u.E2EMax, true)
	check("itl_s", c.Stats["itl_s"].Get(u.Statistic), u.ITLMax, true)
	check("decode_tps", c.Stats["decode_tps"].Get(u.Statistic), u.DecodeMin, false)
	if c.SuccessRate < 1 {
		out = append(out, fmt.Sprintf("success rate %.1f%%", 100*c.SuccessRate))
	}
	return fmt.Sprintf("at %d: %v", c.Concurrency, out)
}

// SafeDepth derives the max safe queue depth of one context's bursts.
func (r *Report) SafeDepth(context int) (Depth, bool) {
	cells := r.ladder("burst", context, r.Plan.Output)
	if len(cells) == 0 || r.Plan.BurstTTFTMax <= 0 {
		return Depth{}, false
	}
	levels := make([]level, len(cells))
	for i, c := range cells {
		levels[i] = level{n: c.Concurrency, margin: (r.Plan.BurstTTFTMax - c.Stats["ttft_s"].Mean) / r.Plan.BurstTTFTMax}
	}
	d, capped, _ := firstCrossing(levels)
	return Depth{Context: context, TTFTMax: r.Plan.BurstTTFTMax, Depth: d, Capped: capped}, true
}

// Derive recomputes everything that follows from the cells: each cell's
// statistics, the pooled view of repeated cells with their confidence
// intervals, scaling efficiency and goodput, the use cases' limits (with the
// spread of each run's) and the safe queue depths. Search results are cells
// too, so they take part.
func (r *Report) Derive() {
	for i := range r.Cells {
		r.Cells[i].summarise()
	}
	r.pooled = pool(r.Cells)
	for _, cells := range [][]Cell{r.Cells, r.pooled} {
		for i := range cells {
			r.relate(&cells[i])
		}
	}
	r.Limits = r.Limits[:0]
	runs := r.runs()
	for _, u := range r.Plan.UseCases {
		l := r.UseCaseLimit(u)
		if len(runs) > 1 {
			for _, run := range runs {
				l.Runs = append(l.Runs, run.UseCaseLimit(u).Capacity)
			}
			l.CI = ci95(l.Runs)
		}
		r.Limits = append(r.Limits, l)
	}
	r.SafeQueue = r.SafeQueue[:0]
	for _, ctx := range r.Plan.Contexts {
		if d, ok := r.SafeDepth(ctx); ok {
			r.SafeQueue = append(r.SafeQueue, d)
		}
	}
}

// relate sets what a cell's figures are relative to: its scaling efficiency
// (against the single-request cell of its lengths) and its goodput per use case.
func (r *Report) relate(c *Cell) {
	c.Efficiency = 0
	if one, ok := r.Cell(Key{Mode: c.Mode, Context: c.Context, Output: c.Output, Concurrency: 1}); ok && one.Throughput > 0 && c.Mode != "rate" {
		c.Efficiency = c.Throughput / (one.Throughput * float64(c.Concurrency))
	}
	c.Goodput = nil
	for _, u := range r.Plan.UseCases {
		if u.Context == c.Context && u.Output == c.Output {
			if c.Goodput == nil {
				c.Goodput = map[string]float64{}
			}
			c.Goodput[u.Name] = u.Goodput(c)
		}
	}
}

// summarise computes a cell's statistics, throughput and success rate from its requests.
func (c *Cell) summarise() {
	c.Stats = map[string]Values{}
	tokens := 0
	for _, r := range c.Requests {
		tokens += r.OutputTokens
	}
	for _, m := range Metrics {
		vs := make([]float64, len(c.Requests))
		for i, r := range c.Requests {
			vs[i] = m.Value(r)
		}
		c.Stats[m.Name] = summary(vs)
	}
	c.Throughput = 0
	if c.Duration > 0 {
		c.Throughput = float64(tokens) / c.Duration
	}
	failed := 0
	for _, n := range c.Failures {
		failed += n
	}
	c.SuccessRate = 0
	if total := len(c.Requests) + failed; total > 0 {
		c.SuccessRate = float64(len(c.Requests)) / float64(total)
	}
	c.Watts, c.JoulesPerToken = nil, nil
	if c.Energy != nil && c.Duration > 0 {
		w := *c.Energy / c.Duration
		c.Watts = &w
		if tokens > 0 {
			j := *c.Energy / float64(tokens)
			c.JoulesPerToken = &j
		}
	}
}

func summary(vs []float64) Values {
	if len(vs) == 0 {
		return Values{}
	}
	return Values{Mean: capacity.Statistic(vs, "mean"), P50: capacity.Statistic(vs, "p50"), P90: capacity.Statistic(vs, "p90"),
		P95: capacity.Statistic(vs, "p95"), P99: capacity.Statistic(vs, "p99")}
}

// limitFor returns the derived limit of a use case.
func (r *Report) limitFor(name string) (Limit, bool) {
	for _, l := range r.Limits {
		if l.UseCase == name {
			return l, true
		}
	}
	return Limit{}, false
}
