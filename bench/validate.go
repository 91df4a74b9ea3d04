package bench

import (
	"errors"
	"fmt"
)

// More bounds of a report's numbers (plan.go has those of a plan).
const (
	maxTPS        = 1e9  // a request's decode or prefill speed, tokens per second
	maxThroughput = 1e12 // a cell's output tokens per second
	maxJoules     = 1e15 // a cell's energy
	maxWatts      = 1e9  // a cell's power, its energy over its duration
	maxTimeScale  = 1e6
)

// validate checks every number a report.json holds before anything is
// derived from it, each error naming its field's path: Go's JSON reads no
// NaN or Inf, but a duration of 5e-324 s under 10^18 tokens makes one, and
// an axis from it never ended (issue 37).
func (r *Report) validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	within := func(path string, v, lo, hi float64) {
		if !(v >= lo && v <= hi) { // NaN fails
			bad(path, "%g is out of range [%g, %g]", v, lo, hi)
		}
	}
	if !(r.TimeScale > 0 && r.TimeScale <= maxTimeScale) {
		bad("time_scale", "%g is out of range (0, %g]", r.TimeScale, float64(maxTimeScale))
	}
	within("energy_price_kwh", r.EnergyPrice, 0, 1e6)
	if h := r.Hardware; h != nil {
		within("hardware.gpus", float64(h.GPUs), 0, 1e5)
		within("hardware.memory_gib", h.MemoryGiB, 0, 1e6)
		within("hardware.power_limit_w", h.PowerLimitW, 0, 1e6)
	}
	if err := r.Plan.Validate(); err != nil {
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("plan.%w", e))
		}
	}
	for i := range r.Cells {
		errs = append(errs, r.Cells[i].validate(fmt.Sprintf("cells[%d]", i)))
	}
	return errors.Join(errs...)
}

// unjoin lists the errors errors.Join joined; another error alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func (c *Cell) validate(path string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s%s: %s", path, field, fmt.Sprintf(format, args...)))
	}
	within := func(field string, v, lo, hi float64) {
		if !(v >= lo && v <= hi) {
			bad(field, "%g is out of range [%g, %g]", v, lo, hi)
		}
	}
	switch c.Mode {
	case "closed", "burst":
		within(".concurrency", float64(c.Concurrency), 1, MaxConcurrency)
		within(".rate_rps", c.Key.Rate, 0, 0)
	case "rate":
		within(".concurrency", float64(c.Concurrency), 0, 0)
		if !(c.Key.Rate > 0 && c.Key.Rate <= maxRate) {
			bad(".rate_rps", "%g is out of range (0, %g]", c.Key.Rate, float64(maxRate))
		}
	default:
		bad(".mode", "%q; want closed, burst or rate", c.Mode)
	}
	within(".context", float64(c.Context), 1, MaxTokens)
	within(".output", float64(c.Output), 1, MaxTokens)
	within(".run", float64(c.Run), 0, maxRepeat-1)
	within(".duration_s", c.Duration, 0, maxSeconds)
	if c.Queue != nil {
		within(".queue_wait_s", *c.Queue, 0, maxSeconds)
	}
	if c.Energy != nil {
		within(".energy_j", *c.Energy, 0, maxJoules)
		if c.Duration > 0 && !(*c.Energy/c.Duration <= maxWatts) {
			bad(".duration_s", "%g s for %g J is a power over %g W", c.Duration, *c.Energy, float64(maxWatts))
		}
	}
	for outcome, n := range c.Failures {
		within(fmt.Sprintf(".failures[%q]", outcome), float64(n), 0, maxCount)
	}
	if s := c.Rate; s != nil {
		within(".open_loop.asked_rps", s.Asked, 0, maxRate)
		within(".open_loop.achieved_rps", s.Achieved, 0, maxRate)
		within(".open_loop.in_flight_mean", s.InFlightMean, 0, MaxConcurrency)
		within(".open_loop.in_flight_max", float64(s.InFlightMax), 0, MaxConcurrency)
		within(".open_loop.held", float64(s.Held), 0, maxCount)
	}
	if float64(len(c.Requests)) > maxCount {
		bad(".requests", "%d requests, over the limit of %g", len(c.Requests), float64(maxCount))
	}
	tokens, end := 0.0, 0.0
	for j, q := range c.Requests {
		p := fmt.Sprintf(".requests[%d]", j)
		for _, f := range []named[float64]{{"start_s", q.Start}, {"ttft_s", q.TTFT}, {"e2e_s", q.E2E}, {"itl_s", q.ITL}} {
			within(p+"."+f.name, f.v, 0, maxSeconds)
		}
		within(p+".decode_tps", q.Decode, 0, maxTPS)
		within(p+".prefill_tps", q.Prefill, 0, maxTPS)
		within(p+".prompt_tokens", float64(q.PromptTokens), 0, MaxTokens)
		within(p+".output_tokens", float64(q.OutputTokens), 0, MaxTokens)
		tokens += float64(q.OutputTokens)
		end = max(end, q.Start+q.E2E)
	}
	// A cell lasts until its last request ends: a shorter duration is no
	// measurement, and its throughput may be no number at all.
	if len(errs) == 0 && len(c.Requests) > 0 {
		if c.Duration < end*(1-1e-9) {
			bad(".duration_s", "%g s ends before its last request does (start_s + e2e_s = %g s)", c.Duration, end)
		} else if c.Duration > 0 && !(tokens/c.Duration <= maxThroughput) {
			bad(".duration_s", "%g s for %g output tokens is a throughput over %g tok/s", c.Duration, tokens, float64(maxThroughput))
		}
	}
	return errors.Join(errs...)
}
