package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/probe"
)

// Arrival processes of the open-loop mode, as vLLM's --request-rate and
// guidellm's rate types name them.
const (
	Constant = "constant" // evenly spaced
	Poisson  = "poisson"  // exponential gaps: independent users
)

// RateStats is what an open-loop cell held: the rate asked and achieved,
// and the requests in flight it led to (the server's answer to the rate).
type RateStats struct {
	Asked        float64 `json:"asked_rps"`
	Achieved     float64 `json:"achieved_rps"` // requests sent over the time between the first and last send
	InFlightMean float64 `json:"in_flight_mean"`
	InFlightMax  int     `json:"in_flight_max"`
	// Held counts the sends that waited for a slot under the plan's cap on
	// requests in flight: the rate asked was not held.
	Held int `json:"held,omitempty"`
}

// DefaultMaxInFlight caps an open-loop cell's requests in flight unless the
// plan says otherwise: a rate the server cannot keep up with would otherwise
// open connections until the client runs out of them.
const DefaultMaxInFlight = 1024

func (p Plan) maxInFlight() int {
	if p.MaxInFlight > 0 {
		return p.MaxInFlight
	}
	return DefaultMaxInFlight
}

// DefaultRateSeconds is how long (in the server's time) an open-loop cell
// sends at its rate when no request count or duration is given; it sends at
// least MinSamples requests.
const DefaultRateSeconds = 60

// arrivals are the send offsets of n requests at rate per second: evenly
// spaced, or a Poisson process seeded by the plan's seed and the cell, so a
// rerun sends the same pattern.
func arrivals(process string, rate float64, n int, seed uint64, k Key) []time.Duration {
	h := fnv.New64a()
	h.Write([]byte(k.String()))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	out := make([]time.Duration, n)
	t := 0.0
	for i := range out {
		out[i] = time.Duration(t * float64(time.Second))
		if process == Poisson {
			t += rng.ExpFloat64() / rate
		} else {
			t += 1 / rate
		}
	}
	return out
}

// openLoop runs one open-loop cell: requests sent on the arrival schedule
// whatever the server's state, each in its own goroutine, so a slow server
// sees its queue grow as it would in production.
func (r *Runner) openLoop(ctx context.Context, p Plan, k Key) (Cell, error) {
	sc := r.scenario(p, k)
	before := r.read(ctx)
	n := p.Requests(k)
	// An overloaded server would otherwise take requests without bound:
	// past the cap a send waits for a slot, late, and says so.
	slots := make(chan struct{}, p.maxInFlight())
	held := 0
	// The schedule is in the server's time; a time-scaled simulator runs it
	// scale times faster.
	at := arrivals(p.Arrival, k.Rate*r.scale, n, p.Seed, k)
	var (
		mu      sync.Mutex
		results []probe.Result
		wg      sync.WaitGroup
		sent    []time.Time
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	start := time.Now()
	draw := newLengths(p, k)
	cctx, stall := watch(ctx, k, sc)
	// stop ends the cell early: ctx's end, or a stall.
	stop := func() (Cell, error) {
		wg.Wait()
		if err := stall.done(); err != nil {
			return Cell{}, err
		}
		return Cell{}, ctx.Err()
	}
	for i := range n {
		pr := r.prepare(cctx, sc, draw) // before its time: prompt building is not the server's latency
		if res, failed := pr.Failed(); failed {
			stall.see(res)
		}
		timer.Reset(time.Until(start.Add(at[i])))
		select {
		case <-cctx.Done():
			return stop()
		case <-timer.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			held++
			select {
			case slots <- struct{}{}:
			case <-cctx.Done():
				return stop()
			}
		}
		sent = append(sent, time.Now())
		wg.Go(func() {
			defer func() { <-slots }()
			res := r.Prober.Send(cctx, pr)
			stall.see(res)
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := stall.done(); err != nil {
		return Cell{}, err
	}
	if ctx.Err() != nil {
		return Cell{}, ctx.Err()
	}
	c := r.cellOf(k, start, time.Now(), results, before, r.read(ctx))
	c.Rate = rateStats(k.Rate, sent, results, r.scale)
	c.Rate.Held = held
	return c, nil
}

// rateStats measures an open-loop cell in the server's time.
func rateStats(asked float64, sent []time.Time, results []probe.Result, scale float64) *RateStats {
	s := &RateStats{Asked: asked}
	if len(sent) > 1 {
		s.Achieved = float64(len(sent)-1) / sent[len(sent)-1].Sub(sent[0]).Seconds() / scale
	}
	// In flight: +1 at each start, -1 at each end, swept in time order.
	type event struct {
		at time.Time
		d  int
	}
	var events []event
	var busy time.Duration
	first, last := time.Time{}, time.Time{}
	for _, res := range results {
		if res.Start.IsZero() {
			continue
		}
		end := res.Start.Add(res.E2E)
		events = append(events, event{res.Start, 1}, event{end, -1})
		busy += res.E2E
		if first.IsZero() || res.Start.Before(first) {
			first = res.Start
		}
		if end.After(last) {
			last = end
		}
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // an end before a start at the same instant
	})
	n := 0
	for _, e := range events {
		n += e.d
		s.InFlightMax = max(s.InFlightMax, n)
	}
	if span := last.Sub(first); span > 0 {
		s.InFlightMean = float64(busy) / float64(span) // Little's law over the cell
	}
	return s
}

// rateRow is an open-loop cell as the report's table shows it.
type rateRow struct {
	Context, Output int
	*RateStats
	Success float64
	Goodput string // per use case at the cell's lengths
}

// rateRows are the open-loop cells by context and rate.
func (r *Report) rateRows() []rateRow {
	var out []rateRow
	for _, ctx := range r.contexts() {
		for _, c := range r.ladder("rate", ctx, r.Plan.Output) {
			if c.Rate == nil {
				continue
			}
			var good []string
			for _, u := range r.Plan.UseCases {
				if v, ok := c.Goodput[u.Name]; ok {
					good = append(good, fmt.Sprintf("%s %.0f%%", u.Name, 100*v))
				}
			}
			out = append(out, rateRow{Context: c.Context, Output: c.Output, RateStats: c.Rate, Success: c.SuccessRate, Goodput: strings.Join(good, ", ")})
		}
	}
	return out
}
