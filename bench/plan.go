package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/config"
)

// DefaultRounds is how many requests each slot of a closed loop serves when no
// request count or duration is given: the reference reports' protocol as the
// simulator reproduces it (sim.Rounds).
const DefaultRounds = 2

// DefaultConcurrency is reports 000 and 001's ladder.
var DefaultConcurrency = []int{1, 2, 4, 6, 8, 10}

// Plan is what a sweep measures.
type Plan struct {
	Contexts    []int `json:"contexts"`
	Concurrency []int `json:"concurrency"`
	Output      int   `json:"output_tokens"`
	// RequestsPerCell fixes a closed-loop cell's request count; 0 gives
	// DefaultRounds per slot. CellDuration > 0 runs each cell for that long
	// (virtual seconds) instead.
	RequestsPerCell int     `json:"requests_per_cell,omitempty"`
	CellDuration    float64 `json:"cell_duration_s,omitempty"`
	// Warmup requests are sent alone before the first cell of each context and
	// output length and discarded: they size the prompt and warm the server.
	Warmup int `json:"warmup"`
	// WarmCache lets prompts share a prefix cache; false gives each prompt a
	// fresh nonce, the reference reports' "no prompt caching".
	WarmCache bool `json:"warm_cache,omitempty"`
	// Burst sizes (report 004's queue mode) at every context; their safe queue
	// depth is the largest burst whose mean TTFT stays within BurstTTFTMax.
	Burst        []int   `json:"burst,omitempty"`
	BurstTTFTMax float64 `json:"burst_ttft_max_s,omitempty"`
	// Rates are open-loop cells at every context: requests sent at this many
	// per second whatever the server's state, spaced by Arrival (Constant or
	// Poisson, seeded by Seed).
	Rates   []float64 `json:"rates,omitempty"`
	Arrival string    `json:"arrival,omitempty"`
	Seed    uint64    `json:"seed,omitempty"`
	// MaxInFlight caps the requests an open-loop cell keeps in flight
	// (0: DefaultMaxInFlight); a send past it waits for one to end.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// InputSpread and OutputSpread draw each request's prompt and output
	// lengths around the cell's, with this coefficient of variation (0: every
	// request at the cell's lengths), seeded by Seed.
	InputSpread  float64 `json:"input_spread,omitempty"`
	OutputSpread float64 `json:"output_spread,omitempty"`
	// Repeat measures every cell this many times (0 or 1: once); the report
	// pools the runs and gives each figure and limit a 95% confidence interval.
	Repeat int `json:"repeat,omitempty"`
	// Search narrows each use case's limit with extra cells, up to SearchMax.
	Search    bool      `json:"search"`
	SearchMax int       `json:"search_max,omitempty"`
	UseCases  []UseCase `json:"use_cases"`
}

// UseCase is a use case's thresholds at its scenario's context and output length.
type UseCase struct {
	Name      string  `json:"name"`
	Context   int     `json:"context"`
	Output    int     `json:"output"`
	Statistic string  `json:"statistic"`
	TTFTMax   float64 `json:"ttft_max_s,omitempty"`
	E2EMax    float64 `json:"e2e_max_s,omitempty"`
	ITLMax    float64 `json:"itl_max_s,omitempty"`
	DecodeMin float64 `json:"decode_min_tps,omitempty"`
}

// UseCases takes the config's use cases at their scenarios' context lengths.
// A use case with an E2E threshold keeps its scenario's output length: that
// is the response its users wait for. The others run at output tokens, the
// grid's: the daemon probes them with short outputs to spare the server, but
// a closed loop of short requests is mostly prefill, not the load of the
// reference reports, whose requests all stream 1024 tokens.
func UseCases(c *config.Config, output int) []UseCase {
	var out []UseCase
	for _, u := range c.UseCases {
		for _, s := range c.Scenarios {
			if s.Name == u.Scenario {
				n := output
				if u.E2EMax > 0 {
					n = s.OutputTokens
				}
				out = append(out, UseCase{Name: u.Name, Context: s.InputTokens, Output: n, Statistic: u.Statistic,
					TTFTMax: u.TTFTMax.Seconds(), E2EMax: u.E2EMax.Seconds(), ITLMax: u.ITLMax.Seconds(), DecodeMin: u.DecodeMinTPS})
			}
		}
	}
	return out
}

// Contexts are the config's scenario context lengths, ascending, once each.
func Contexts(c *config.Config) []int {
	var out []int
	for _, s := range c.Scenarios {
		out = append(out, s.InputTokens)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Margin is the cell's smallest relative margin to the use case's thresholds,
// the use case's statistic taken over the cell's requests: < 0 when one is breached.
func (u UseCase) Margin(c *Cell) float64 {
	m := math.Inf(1)
	over := func(metric string, max float64) {
		if max > 0 {
			m = math.Min(m, (max-c.Stats[metric].Get(u.Statistic))/max)
		}
	}
	over("ttft_s", u.TTFTMax)
	over("e2e_s", u.E2EMax)
	over("itl_s", u.ITLMax)
	if u.DecodeMin > 0 {
		m = math.Min(m, (c.Stats["decode_tps"].Get(u.Statistic)-u.DecodeMin)/u.DecodeMin)
	}
	if c.SuccessRate < 1 {
		m = math.Min(m, c.SuccessRate-1) // a failing request breaks every SLO
	}
	return m
}

// Bounds of what a sweep can ask and a report can hold. A report.json is
// read back to resume, compare and seed the daemon: numbers past these are
// no measurement of any server, and a concurrency of 2^62 once seeded a
// capacity of 9.22e18 (issue 37).
const (
	MaxTokens      = config.MaxTokens // a context or output length
	MaxConcurrency = 1 << 16          // requests in flight from one client
	maxRate        = 1e6              // requests per second
	maxRepeat      = 1000
	maxList        = 64 // values of one list: contexts, levels, bursts, rates, use cases
	maxSeconds     = 1e7
	maxCount       = 1e9 // requests of a cell, warm-up requests
)

// Validate reports every problem of a plan, each named by its field in
// report.json (the flags of the same names).
func (p Plan) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	list := func(name string, vs []int, most int, needed bool) {
		if needed && len(vs) == 0 {
			bad(name, "at least one value needed")
		}
		if len(vs) > maxList {
			bad(name, "%d values, over the limit of %d", len(vs), maxList)
			return
		}
		for i, v := range vs {
			if v < 1 || v > most {
				bad(fmt.Sprintf("%s[%d]", name, i), "%d is not a count from 1 to %d", v, most)
			}
		}
	}
	list("contexts", p.Contexts, MaxTokens, true)
	// A sweep of bursts or of rates alone has no closed-loop ladder.
	list("concurrency", p.Concurrency, MaxConcurrency, len(p.Burst) == 0 && len(p.Rates) == 0)
	list("burst", p.Burst, MaxConcurrency, false)
	if p.Output < 2 || p.Output > MaxTokens {
		bad("output_tokens", "from 2 (ITL needs two tokens) to %d needed, got %d", MaxTokens, p.Output)
	}
	count := func(name string, v int, most float64) {
		if v < 0 || float64(v) > most {
			bad(name, "%d is not a count from 0 to %g", v, most)
		}
	}
	count("requests_per_cell", p.RequestsPerCell, maxCount)
	count("warmup", p.Warmup, maxCount)
	count("max_in_flight", p.MaxInFlight, MaxConcurrency)
	count("repeat", p.Repeat, maxRepeat)
	seconds := func(name string, v float64) {
		if !(v >= 0 && v <= maxSeconds) { // NaN fails
			bad(name, "%g is not a number of seconds from 0 to %g", v, float64(maxSeconds))
		}
	}
	seconds("cell_duration_s", p.CellDuration)
	seconds("burst_ttft_max_s", p.BurstTTFTMax)
	if len(p.Rates) > maxList {
		bad("rates", "%d values, over the limit of %d", len(p.Rates), maxList)
	} else {
		for i, rate := range p.Rates {
			if !(rate > 0 && rate <= maxRate) {
				bad(fmt.Sprintf("rates[%d]", i), "%g is not a number of requests per second from 0 to %g", rate, float64(maxRate))
			}
		}
	}
	if len(p.Rates) > 0 && p.Arrival != Constant && p.Arrival != Poisson {
		bad("arrival", "%q; want %s or %s", p.Arrival, Constant, Poisson)
	}
	for _, f := range []named[float64]{{"input_spread", p.InputSpread}, {"output_spread", p.OutputSpread}} {
		if !(f.v >= 0 && f.v <= 2) {
			bad(f.name, "%g; want a coefficient of variation from 0 to 2", f.v)
		}
	}
	if p.Search && (p.SearchMax < 2 || p.SearchMax > MaxConcurrency) {
		bad("search_max", "the highest concurrency of a search must be from 2 to %d, got %d", MaxConcurrency, p.SearchMax)
	}
	if len(p.UseCases) > maxList {
		bad("use_cases", "%d use cases, over the limit of %d", len(p.UseCases), maxList)
	} else {
		for i, u := range p.UseCases {
			errs = append(errs, u.validate(fmt.Sprintf("use_cases[%d]", i)))
		}
	}
	return errors.Join(errs...)
}

// named is a field's value and its name in report.json, for checks of
// several fields in their order.
type named[T int | float64] struct {
	name string
	v    T
}

// validate checks a use case as a report holds it.
func (u UseCase) validate(path string) error {
	var errs []error
	for _, f := range []named[int]{{"context", u.Context}, {"output", u.Output}} {
		if f.v < 1 || f.v > MaxTokens {
			errs = append(errs, fmt.Errorf("%s.%s: %d is not a length from 1 to %d", path, f.name, f.v, MaxTokens))
		}
	}
	switch u.Statistic {
	case "mean", "p50", "p90", "p95", "p99":
	default:
		errs = append(errs, fmt.Errorf("%s.statistic: %q; want mean, p50, p90, p95 or p99", path, u.Statistic))
	}
	for _, f := range []named[float64]{{"ttft_max_s", u.TTFTMax}, {"e2e_max_s", u.E2EMax}, {"itl_max_s", u.ITLMax}} {
		if !(f.v >= 0 && f.v <= maxSeconds) {
			errs = append(errs, fmt.Errorf("%s.%s: %g is not a number of seconds from 0 to %g", path, f.name, f.v, float64(maxSeconds)))
		}
	}
	if !(u.DecodeMin >= 0 && u.DecodeMin <= maxTPS) {
		errs = append(errs, fmt.Errorf("%s.decode_min_tps: %g is not a speed from 0 to %g tokens per second", path, u.DecodeMin, float64(maxTPS)))
	}
	return errors.Join(errs...)
}

// Cells lists the planned cells in the order they run: the grid of contexts x
// concurrency, each use case's ladder where its output length is not the
// grid's, bursts, then open-loop rates; the whole list once per run. Search
// cells are decided as results come in.
func (p Plan) Cells() []Key {
	once := p.cellsOnce()
	var out []Key
	for run := range p.runs() {
		for _, k := range once {
			k.Run = run
			out = append(out, k)
		}
	}
	return out
}

// runs is how many times each cell is measured.
func (p Plan) runs() int { return max(1, p.Repeat) }

func (p Plan) cellsOnce() []Key {
	var out []Key
	add := func(k Key) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for _, ctx := range p.Contexts {
		for _, n := range p.Concurrency {
			add(Key{Mode: "closed", Context: ctx, Output: p.Output, Concurrency: n})
		}
	}
	for _, u := range p.UseCases {
		for _, n := range p.Concurrency {
			add(Key{Mode: "closed", Context: u.Context, Output: u.Output, Concurrency: n})
		}
	}
	for _, ctx := range p.Contexts {
		for _, n := range p.Burst {
			add(Key{Mode: "burst", Context: ctx, Output: p.Output, Concurrency: n})
		}
	}
	for _, ctx := range p.Contexts {
		for _, rate := range p.Rates {
			add(Key{Mode: "rate", Context: ctx, Output: p.Output, Rate: rate})
		}
	}
	return out
}

// Requests is how many requests a cell sends (0: as many as fit its duration).
func (p Plan) Requests(k Key) int {
	switch {
	case k.Mode == "burst":
		return k.Concurrency
	case k.Mode == "rate" && p.CellDuration > 0:
		return int(math.Ceil(p.CellDuration * k.Rate))
	case k.Mode == "rate" && p.RequestsPerCell > 0:
		return p.RequestsPerCell
	case k.Mode == "rate":
		return max(MinSamples, int(math.Ceil(DefaultRateSeconds*k.Rate)))
	case p.CellDuration > 0:
		return 0
	case p.RequestsPerCell > 0:
		return p.RequestsPerCell
	}
	return DefaultRounds * k.Concurrency
}

// Assumed speeds for a dry run's duration estimate, before anything is measured.
type Assumed struct {
	PrefillTPS float64 // prompt tokens per second of the whole server
	DecodeTPS  float64 // output tokens per second of one stream
}

// DefaultAssumed is mid-range among the reference reports' single-GPU figures.
var DefaultAssumed = Assumed{PrefillTPS: 10000, DecodeTPS: 60}

// Estimate is a cell's expected duration, from the assumed speeds: prefills
// share the server, streams decode side by side.
func (a Assumed) Estimate(p Plan, k Key) time.Duration {
	if k.Mode == "closed" && p.CellDuration > 0 {
		return time.Duration(p.CellDuration * float64(time.Second))
	}
	if k.Mode == "rate" { // the sends, then the last request
		n := float64(p.Requests(k))
		return time.Duration(((n-1)/k.Rate + a.round(Key{Context: k.Context, Output: k.Output, Concurrency: 1})) * float64(time.Second))
	}
	rounds := math.Ceil(float64(p.Requests(k)) / float64(k.Concurrency))
	return time.Duration(rounds * a.round(k) * float64(time.Second))
}

// round is the seconds one request of each slot takes.
func (a Assumed) round(k Key) float64 {
	return float64(k.Concurrency*k.Context)/a.PrefillTPS + float64(k.Output)/a.DecodeTPS
}

// DryRun prints the cells a plan will run, the tokens it will send and its
// expected duration; done cells (from a report being resumed) are marked.
// scale is the server's time scale (1: a real server): a time-scaled
// simulator takes 1/scale of the simulated duration in wall time.
func DryRun(w io.Writer, p Plan, a Assumed, scale float64, done func(Key) bool) {
	var total time.Duration
	var in, out, reqs int
	fmt.Fprintf(w, "%-7s %8s %7s %8s %9s %10s  %s\n", "mode", "context", "output", "load", "requests", "expected", "")
	for _, k := range p.Cells() {
		d := a.Estimate(p, k)
		n := p.Requests(k)
		status := ""
		if done != nil && done(k) {
			status, d, n = "done (resumed)", 0, 0
		}
		if n == 0 && status == "" { // a duration per cell
			n = int(math.Ceil(d.Seconds() / a.round(k) * float64(k.Concurrency)))
		}
		total += d
		reqs += n
		in += n * k.Context
		out += n * k.Output
		fmt.Fprintf(w, "%-7s %8d %7d %8s %9d %10s  %s\n", k.Mode, k.Context, k.Output, k.load(), n, d.Round(time.Second), status)
	}
	warm := 0
	if p.Warmup > 0 {
		seen := map[[2]int]bool{}
		for _, k := range p.Cells() {
			if done != nil && done(k) {
				continue // a resumed sweep warms only the lengths it still measures
			}
			if !seen[[2]int{k.Context, k.Output}] {
				seen[[2]int{k.Context, k.Output}] = true
				warm += p.Warmup
				in += p.Warmup * k.Context
				out += p.Warmup * k.Output
			}
		}
	}
	fmt.Fprintf(w, "\n%d cells, %d requests (+%d warm-up), %d prompt tokens, %d output tokens\n", len(p.Cells()), reqs, warm, in, out)
	fmt.Fprintf(w, "expected duration: %s, assuming %.0f prompt tok/s per server and %.0f output tok/s per stream\n",
		total.Round(time.Second), a.PrefillTPS, a.DecodeTPS)
	if scale > 0 && scale != 1 {
		fmt.Fprintf(w, "the server is a simulator at %gx real time: that is %s of wall time\n", scale,
			time.Duration(float64(total)/scale).Round(time.Second))
	}
	if p.Search {
		fmt.Fprintf(w, "plus the cells --search adds to narrow each use case's limit (up to concurrency %d)\n", p.SearchMax)
	}
}
