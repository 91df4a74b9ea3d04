package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/power"
	"github.com/headroom-dev/headroom/probe"
)

// Runner measures cells against one server with the daemon's probe code.
type Runner struct {
	Prober *probe.Prober
	// Scrape reads the server's own metrics (queue wait, time scale); nil: not read.
	Scrape func(context.Context) (engine.Load, error)
	Power  power.Source // nil: no power readings
	Logger *slog.Logger
	// Progress hears of every cell; nil: silent.
	Progress *Progress
	// Save persists the report after every cell, so a killed sweep resumes.
	Save func(*Report) error

	scale  float64
	warmed map[[2]int]bool
}

// NewClient is the probe client for a sweep of up to streams requests in
// flight: every one of them keeps its connection between requests. The
// transport's default pool of 100 idle connections would close the rest as
// a round of requests ends together, and the next round would dial anew.
func NewClient(streams int) *http.Client {
	c := probe.NewClient(false)
	tr := c.Transport.(*http.Transport)
	tr.MaxIdleConnsPerHost, tr.MaxIdleConns = max(tr.MaxIdleConnsPerHost, streams), max(tr.MaxIdleConns, streams)
	return c
}

// ErrOtherServer refuses to resume a report measured elsewhere.
var ErrOtherServer = errors.New("report was measured against another server or time scale")

// ErrStalled ends a sweep whose server gave no answer within a request's
// deadline where one was due: the model list and tokenizer, a prompt's
// sizing, a warm-up request sent alone, or the first request of a cell to
// end, before any of the cell succeeded. A sweep that went on would wait
// out the deadline of every request left.
var ErrStalled = errors.New("the server stalled")

// Run completes the report's plan: the cells it lacks, then, with Search, the
// cells that narrow each use case's limit, saving after each. When ctx ends it
// stops between cells' requests: finished cells stay in the report, the cell
// cut short is dropped, and ctx's error is returned.
func (r *Runner) Run(ctx context.Context, rep *Report) error {
	r.scale, r.warmed = 1, map[[2]int]bool{}
	if r.Scrape != nil {
		l, err := r.Scrape(ctx)
		switch {
		case err != nil:
			r.Logger.Warn("server metrics unreadable: no queue wait, time scale taken as 1", "err", err)
		default:
			if l.TimeScale > 0 && l.TimeScale <= maxTimeScale {
				r.scale = l.TimeScale
			}
			if l.Engine != "" {
				rep.Target.Engine = l.Engine
			}
		}
	}
	if r.Power != nil {
		gpus, err := r.Power.Read(ctx)
		if err != nil {
			r.Logger.Warn("power source unreadable: no hardware card", "err", err)
		}
		if h := hardwareOf(gpus); h != nil {
			rep.Hardware = h
		}
	}
	if len(rep.Cells) > 0 && rep.TimeScale != r.scale {
		return fmt.Errorf("%w: report at time scale %g, server at %g", ErrOtherServer, rep.TimeScale, r.scale)
	}
	rep.TimeScale = r.scale
	if r.scale != 1 {
		r.Logger.Info("server is a time-scaled simulator: times and rates are reported in simulated time", "time_scale", r.scale)
	}
	var todo []Key
	for _, k := range rep.Plan.Cells() {
		if !rep.measured(k) {
			todo = append(todo, k)
		}
	}
	first := Key{Mode: "closed", Context: 1, Output: 1, Concurrency: 1}
	if cells := rep.Plan.Cells(); len(todo) > 0 {
		first = todo[0]
	} else if len(cells) > 0 {
		first = cells[0]
	}
	if err := r.resolve(ctx, rep.Plan, first); err != nil {
		return err
	}
	rep.Target.Model = r.Prober.Model()
	r.Progress.Start(rep.Plan, todo)
	for _, k := range todo {
		if err := r.cell(ctx, rep, k); err != nil {
			return err
		}
	}
	if rep.Plan.Search {
		for _, u := range rep.Plan.UseCases {
			if err := r.search(ctx, rep, u); err != nil {
				return err
			}
		}
	}
	rep.Complete = true
	return r.save(rep)
}

// resolve finds the model and the tokenizer within the deadline of the
// first cell's requests.
func (r *Runner) resolve(ctx context.Context, p Plan, first Key) error {
	deadline := r.scenario(p, first).Timeout
	rctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	err := r.Prober.Resolve(rctx)
	if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		// A tokenizer that never answered leaves no error: the deadline says it.
		return fmt.Errorf("%w: the model list and tokenizer gave no answer within %s (the deadline of a request of cell %s)", ErrStalled, deadline, first)
	}
	if err != nil {
		return fmt.Errorf("resolve model: %w", err)
	}
	return nil
}

// stalled is the error that ends a sweep when res, the request of a cell
// that had to answer, ran out of its deadline; nil for another result.
func stalled(what string, k Key, sc probe.Scenario, res probe.Result) error {
	if res.Outcome != probe.Timeout {
		return nil
	}
	return fmt.Errorf("%w: %s of cell %s gave no answer within its deadline of %s: %v", ErrStalled, what, k, sc.Timeout, res.Err)
}

// stallWatch ends a cell at the first request that runs out of its
// deadline before any request of the cell succeeded: requests sent
// together that all time out together say that the server answers
// nothing, and a closed loop would send its next round to wait as long.
type stallWatch struct {
	k      Key
	sc     probe.Scenario
	cancel context.CancelFunc
	mu     sync.Mutex
	ok     bool
	err    error
}

// watch returns a context for the cell's requests and its watch.
func watch(ctx context.Context, k Key, sc probe.Scenario) (context.Context, *stallWatch) {
	cctx, cancel := context.WithCancel(ctx)
	return cctx, &stallWatch{k: k, sc: sc, cancel: cancel}
}

func (w *stallWatch) see(res probe.Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case res.Outcome == probe.Success:
		w.ok = true
	case !w.ok && w.err == nil:
		if w.err = stalled("a request", w.k, w.sc, res); w.err != nil {
			w.cancel()
		}
	}
}

// done releases the cell's context; its error is the stall seen, if any.
func (w *stallWatch) done() error {
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// search narrows a use case's limit: exponential steps, then bisection,
// measuring the levels the ladder lacks.
func (r *Runner) search(ctx context.Context, rep *Report, u UseCase) error {
	lo, hi := 0, 0 // the bracket so far, for the progress line: lo passed, hi failed
	_, _, err := capacity.Search(rep.Plan.SearchMax, func(n int) (float64, error) {
		k := Key{Mode: "closed", Context: u.Context, Output: u.Output, Concurrency: n}
		for run := range rep.Plan.runs() {
			k.Run = run
			if !rep.measured(k) {
				r.Progress.Search(u.Name, k, lo, hi, rep.Plan.SearchMax)
				if err := r.cell(ctx, rep, k); err != nil {
					return 0, err
				}
			}
		}
		c, _ := rep.Cell(k) // pooled over the runs
		m := u.Margin(c)
		if m >= 0 {
			lo = max(lo, n)
		} else if hi == 0 || n < hi {
			hi = n
		}
		return m, nil
	})
	return err
}

// cell measures one cell, warming its lengths first, and saves the report.
func (r *Runner) cell(ctx context.Context, rep *Report, k Key) error {
	if lengths := [2]int{k.Context, k.Output}; !r.warmed[lengths] && rep.Plan.Warmup > 0 {
		sc := r.scenario(rep.Plan, k)
		for range rep.Plan.Warmup {
			res := r.Prober.Send(ctx, r.prepare(ctx, sc, nil))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Sent alone: a server that does not answer it answers nothing.
			if err := stalled("a warm-up request", k, sc, res); err != nil {
				return err
			}
			if res.Outcome != probe.Success {
				r.Logger.Warn("warm-up request failed", "cell", k.String(), "result", res.Outcome, "err", res.Err)
			}
		}
		r.warmed[lengths] = true
	}
	began := time.Now()
	c, err := r.measure(ctx, rep.Plan, k)
	if err != nil {
		return err
	}
	rep.Cells = append(rep.Cells, c)
	r.Progress.Done(k, time.Since(began))
	return r.save(rep)
}

func (r *Runner) save(rep *Report) error {
	rep.Updated = time.Now().UTC()
	rep.Derive()
	if r.Save == nil {
		return nil
	}
	return r.Save(rep)
}

func (r *Runner) scenario(p Plan, k Key) probe.Scenario {
	sc := config.Scenario{InputTokens: k.Context, OutputTokens: k.Output}
	// A loaded server takes longer: the limit grows with the requests ahead.
	timeout := sc.ProbeTimeout() * time.Duration(1+k.Concurrency/4)
	return probe.Scenario{Name: fmt.Sprintf("bench-%d", k.Context), InputTokens: k.Context, OutputTokens: k.Output,
		Cold: !p.WarmCache, Timeout: time.Duration(float64(timeout) / r.scale)}
}

// prepare builds a request of the cell's lengths, or of lengths drawn around
// them, sized by the server's tokenizer at its own length as every probe is;
// its timeout grows with its lengths. The sizing's requests have the
// request's deadline: a server that never answers them would otherwise
// hold the sweep for ever.
func (r *Runner) prepare(ctx context.Context, sc probe.Scenario, draw *lengths) *probe.Prepared {
	if draw != nil {
		in, out := draw.draw()
		grow := max(1, float64(in)/float64(sc.InputTokens), float64(out)/float64(sc.OutputTokens))
		sc.InputTokens, sc.OutputTokens, sc.Timeout = in, out, time.Duration(float64(sc.Timeout)*grow)
	}
	pctx, cancel := context.WithTimeout(ctx, sc.Timeout)
	defer cancel()
	return r.Prober.Prepare(pctx, sc)
}

// reading is the server's and the GPUs' counters at one moment.
type reading struct {
	load   engine.Load
	loadOK bool
	joules float64 // NaN: unknown
}

func (r *Runner) read(ctx context.Context) reading {
	rd := reading{joules: math.NaN()}
	if r.Scrape != nil {
		l, err := r.Scrape(ctx)
		rd.load, rd.loadOK = l, err == nil
	}
	if r.Power != nil {
		if gpus, err := r.Power.Read(ctx); err == nil && len(gpus) > 0 {
			rd.joules = 0
			for _, g := range gpus {
				rd.joules += g.Joules
			}
		}
	}
	return rd
}

// measure runs one cell: a closed loop keeping exactly k.Concurrency requests
// in flight (each finished one replaced at once), or a burst of that many.
func (r *Runner) measure(ctx context.Context, p Plan, k Key) (Cell, error) {
	if k.Mode == "rate" {
		return r.openLoop(ctx, p, k)
	}
	sc := r.scenario(p, k)
	before := r.read(ctx)
	total := int64(p.Requests(k))
	wallLimit := time.Duration(p.CellDuration / r.scale * float64(time.Second))
	var (
		mu      sync.Mutex
		results []probe.Result
		taken   atomic.Int64
		wg      sync.WaitGroup
		ready   sync.WaitGroup
		start   time.Time
	)
	// Every slot builds its first prompt before the clock starts, then all
	// go at once: building 256 long prompts one after another would stagger
	// the first round (by whole seconds on a time-scaled simulator).
	go1 := make(chan struct{})
	ready.Add(k.Concurrency)
	draw := newLengths(p, k)
	cctx, stall := watch(ctx, k, sc)
	next := func() *probe.Prepared {
		if total > 0 && taken.Add(1) > total {
			return nil
		}
		return r.prepare(cctx, sc, draw)
	}
	for range k.Concurrency {
		wg.Go(func() {
			pr := next()
			ready.Done()
			<-go1
			for pr != nil && cctx.Err() == nil {
				if total == 0 && time.Since(start) >= wallLimit {
					return
				}
				res := r.Prober.Send(cctx, pr)
				stall.see(res)
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
				if k.Mode == "burst" {
					return
				}
				pr = next()
			}
		})
	}
	ready.Wait()
	start = time.Now()
	close(go1)
	wg.Wait()
	if err := stall.done(); err != nil {
		return Cell{}, err
	}
	if ctx.Err() != nil {
		return Cell{}, ctx.Err()
	}
	return r.cellOf(k, start, time.Now(), results, before, r.read(ctx)), nil
}

// cellOf turns a cell's probe results into its record, wall time into virtual.
// finished is when the last request returned: with failures, the cell lasted
// until then, whatever the last success's end.
func (r *Runner) cellOf(k Key, start, finished time.Time, results []probe.Result, before, after reading) Cell {
	s := r.scale
	c := Cell{Key: k, Failures: map[string]int{}, Errors: map[string]string{}}
	end := start
	for _, res := range results {
		if res.Outcome != probe.Success {
			c.Failures[string(res.Outcome)]++
			if c.Failures[string(res.Outcome)] == 1 {
				r.Logger.Warn("request failed", "cell", k.String(), "result", res.Outcome, "err", res.Err)
				c.Errors[string(res.Outcome)] = fmt.Sprint(res.Err)
			}
			continue
		}
		if e := res.Start.Add(res.E2E); e.After(end) {
			end = e
		}
		c.Requests = append(c.Requests, Request{
			Start: res.Start.Sub(start).Seconds() * s, TTFT: res.TTFT.Seconds() * s, E2E: res.E2E.Seconds() * s,
			ITL: res.ITL().Seconds() * s, Decode: res.DecodeTPS() / s, Prefill: res.PrefillTPS() / s,
			PromptTokens: res.PromptTokens, OutputTokens: res.CompletionTokens})
	}
	if len(c.Failures) == 0 {
		c.Failures, c.Errors = nil, nil
	} else if finished.After(end) {
		end = finished
	}
	c.Duration = end.Sub(start).Seconds() * s
	// The engine's histograms and the GPUs' energy are already in its own
	// (virtual) time: no scaling.
	if before.loadOK && after.loadOK {
		if dn := after.load.QueueCount - before.load.QueueCount; dn > 0 {
			q := (after.load.QueueSum - before.load.QueueSum) / dn
			c.Queue = &q
		}
	}
	if j := after.joules - before.joules; !math.IsNaN(j) && j >= 0 {
		c.Energy = &j
	}
	return c
}
