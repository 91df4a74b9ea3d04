// Package monitor runs headroom's probes: one loop per target that picks the
// most overdue scenario, waits for the probe budget, probes, and records.
package monitor

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Schedule decides when each scenario of one target is probed next. It is pure:
// time comes in as values, so tests and the virtual-time capacity tests run it
// without clocks. Probes of one target never overlap, which makes the target's
// probe occupancy exactly the sum of probe durations.
type Schedule struct {
	budget float64
	jitter float64
	rnd    *rand.Rand
	// names, intervals and due are per scenario, in the order given: a
	// scenario is found among a few names, where a map each for intervals
	// and due made 1,000 targets' schedules of the default five scenarios
	// 0.74 MB instead of 0.30.
	names     []string
	intervals []time.Duration
	due       []time.Time
	ready     time.Time // the budget allows no probe before this
	// failures counts the target's probes that failed in a row: a server
	// that is down is down for every scenario.
	failures int
}

// RetryFirst is the wait before the first retry of a failed probe, each
// failure in a row doubling it up to the scenario's interval: a server
// back after a restart is probed within seconds, not at the next 5 or 15
// minute turn, and one that stays down is tried no more often than that.
const RetryFirst = 5 * time.Second

// NewSchedule makes every scenario due at once at start, in the given order.
// It keeps names and intervals, which the caller leaves as they are.
func NewSchedule(names []string, intervals []time.Duration, budget float64, start time.Time, seed uint64) *Schedule {
	s := &Schedule{budget: budget, jitter: 0.1, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		names: names, intervals: intervals, due: make([]time.Time, len(names)), ready: start}
	for i := range names {
		s.due[i] = start.Add(time.Duration(i) * time.Millisecond) // keeps the order stable
	}
	return s
}

// index is the position of a scenario of the schedule's.
func (s *Schedule) index(name string) int {
	return slices.Index(s.names, name)
}

// Next is the scenario to probe next and the earliest time it may start.
func (s *Schedule) Next() (string, time.Time) {
	best := 0
	for i := range s.names[1:] {
		if s.due[i+1].Before(s.due[best]) {
			best = i + 1
		}
	}
	at := s.due[best]
	if at.Before(s.ready) {
		at = s.ready
	}
	return s.names[best], at
}

// Done records a probe that ran from start to end. The next probe of the target
// waits long enough that busy time stays within the budget: a probe of length d
// must be followed by d*(1/budget - 1) of quiet, so long contexts stretch their
// interval by themselves.
func (s *Schedule) Done(name string, start, end time.Time) {
	s.Charge(start, end.Sub(start))
	s.failures = 0
	j := 1 + s.jitter*(2*s.rnd.Float64()-1)
	i := s.index(name)
	s.due[i] = start.Add(time.Duration(float64(s.intervals[i]) * j))
}

// Failed records a probe that ran from start to end and got no answer to
// measure: billed to the budget as any probe, and tried again after a
// backoff from RetryFirst, doubling with each failure in a row, never
// later than the scenario's interval.
func (s *Schedule) Failed(name string, start, end time.Time) {
	s.Charge(start, end.Sub(start))
	i := s.index(name)
	wait := s.intervals[i]
	if s.failures < 30 { // 5 s << 30 is past any interval
		wait = min(wait, RetryFirst<<s.failures)
	}
	s.failures++
	s.due[i] = end.Add(wait)
}

// Charge bills probe time that began at start to the budget: nothing more is
// probed before busy/budget has passed since start. A calibration burst bills
// the time it had a probe in flight, from the first sent to the last done.
func (s *Schedule) Charge(start time.Time, busy time.Duration) {
	if r := start.Add(time.Duration(float64(busy) / s.budget)); r.After(s.ready) {
		s.ready = r
	}
}

// Ready is when the budget next allows a probe.
func (s *Schedule) Ready() time.Time { return s.ready }

// Due is when the scenario is next probed at the earliest: its due time or,
// if later, when the budget allows.
func (s *Schedule) Due(name string) time.Time {
	if due := s.due[s.index(name)]; !due.Before(s.ready) {
		return due
	}
	return s.ready
}
