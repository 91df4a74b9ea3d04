// Package capacity turns probe results tagged with the load they met into SLO
// margins and a capacity estimate: the largest number of concurrent requests
// at which a use case still meets every threshold. It is pure: no I/O, and
// time comes in as values, so it runs in virtual time in tests.
package capacity

import (
	"sync"
	"time"
)

// Point is one successful probe. Times are seconds. InFlight is the requests
// in flight while it ran, itself included; Load is what its TTFT answers to:
// InFlight for a lone probe, and for a burst the requests it competed with
// for prefill (both NaN when the server's metrics were not readable: such
// points count for margins, not for the fit). Burst is the number of
// requests sent together with it, itself included (a calibration burst or a
// bench cell); 0 for a lone probe amid production traffic. The probes of
// one burst share its Time, the moment it was sent.
type Point struct {
	Time     time.Time `json:"time"`
	Load     float64   `json:"load"`
	InFlight float64   `json:"in_flight"`
	// Sent is the requests in flight when it was sent, itself and its
	// burst included: what a server that plans a request's speed on
	// arrival answers to. 0 where not known.
	Sent float64 `json:"sent,omitempty"`
	// KV is the KV-cache tokens production's Held running requests held
	// when it was sent; both 0 where the engine does not say (the KV term
	// then sees production as requests of the use case's own shape).
	KV   float64 `json:"kv_tokens,omitempty"`
	Held float64 `json:"kv_held,omitempty"`
	TTFT float64 `json:"ttft_s"`
	E2E  float64 `json:"e2e_s"`
	ITL  float64 `json:"itl_s"`
	// Steady is the ITL of its decode's typical step (probe.SteadyITL),
	// which leaves out the steps other prompts' prefill lengthened while
	// fewer than half did; 0 where not measured.
	Steady float64 `json:"steady_itl_s,omitempty"`
	// MaxGap is the longest gap between two of its tokens
	// (probe.Result.MaxGap), 0 where not measured: no step of the engine
	// that it decoded in was longer.
	MaxGap float64 `json:"max_gap_s,omitempty"`
	Decode float64 `json:"decode_tps"`
	Burst  int     `json:"burst,omitempty"`
	// Level is, for a lone probe, what Load is for a burst: the requests it
	// competed with for prefill, itself included (monitor.BurstLevel); 0
	// where not known (a level counts the probe, so it is at least 1).
	Level float64 `json:"level,omitempty"`
	// Queued is production's mean prompt tokens, by which its level (a
	// burst's: Load) counted production's prompts ahead of it, each as
	// its tokens' share of the probe's prompt; 0 where not known.
	Queued float64 `json:"queued_prompt_tokens,omitempty"`
	// Rise is, for a burst's probe, how many more of production's
	// requests were running as the burst ended than when it was sent
	// (monitor.productionRise): its decode's batch grew by as much over the
	// burst. 0 where not known.
	Rise float64 `json:"production_rise,omitempty"`
	// Cell is the bench cell (from 1) a seed point was measured in; 0 for a
	// probe. A closed-loop cell's requests all decoded amid its full
	// concurrency, so each counts for decode and ITL (settled).
	Cell int `json:"cell,omitempty"`
	// Aftermath marks a lone probe that was the first request its server
	// took after a calibration burst, and may have paid for the burst
	// (llama.cpp saves a burst's slots as the next task takes one). It
	// counts for no curve and no margin.
	Aftermath bool `json:"aftermath,omitempty"`
	// Lost marks a burst's probe that its deadline or the straggler cut
	// ended (monitor.Sample.Lost): it held its place in the burst's queue,
	// TTFT and E2E are where its first and last tokens came (0: none
	// came), and it measured no decode.
	Lost bool `json:"lost,omitempty"`
	// Engine marks no probe but the engine's own inter-token readings over
	// a span in which production ran alone (monitor.Decode): ITL its mean
	// time between tokens, InFlight the batch its tokens were decoded in,
	// KV and Held the KV tokens that batch held and its count, Waiting the
	// share of its tokens decoded while prompts waited for prefill. It
	// counts for the ITL law only: it is no request of the use case's, and
	// it is not shown among the probes.
	Engine  bool    `json:"-"`
	Waiting float64 `json:"-"`
	// Prompts is the prompt tokens the engine took in per second over an
	// Engine point's span (monitor.Decode.Prompts); NaN where unknown.
	Prompts float64 `json:"-"`
}

// MaxPoints bounds each series whatever the uptime and the time it keeps:
// at the shortest interval the scheduler allows, a day of probes.
const MaxPoints = 4096

// series is a time-ordered series of points.
type series struct{ points []Point }

// add appends p, first dropping what is older than keep before it (0:
// nothing) and, at MaxPoints, the oldest.
func (r *series) add(p Point, keep time.Duration) {
	drop := 0
	if keep > 0 {
		cut := p.Time.Add(-keep)
		for drop < len(r.points) && r.points[drop].Time.Before(cut) {
			drop++
		}
	}
	if len(r.points)-drop >= MaxPoints {
		drop = len(r.points) - MaxPoints + 1
	}
	// Points are dropped by moving the start, never by moving them: a
	// slice since handed out keeps what it held (since). The array's
	// dropped front goes when the series next grows into a new one, below.
	if drop > 0 {
		r.points = r.points[drop:]
	}
	// The capacity follows the points held, an eighth over them: a series
	// in its steady state holds about its window's points, give or take
	// schedule jitter. Grown by append's double, or never given back, it
	// would keep the most it ever held, and across a fleet those records
	// creep up for a day (steps of a third, then of a few percent, in the
	// heap of TestFleetHeapFlat). Between a quarter under and full it
	// stays, so that jitter moves no memory.
	n := len(r.points) + 1
	if n > cap(r.points) || cap(r.points) > 64 && n < cap(r.points)-cap(r.points)/4 {
		sized := make([]Point, len(r.points), n+max(8, n/8))
		copy(sized, r.points)
		r.points = sized
	}
	r.points = append(r.points, p)
}

// since returns the points at or after t, in the order added. Where they
// are the series' last points, as they are but when a probe that ran long
// straddles t (a probe is added when it ends, so its time, when it was
// sent, need not follow the one before), it is the series' own array,
// capped at its end rather than copied: the estimator's cache keeps each
// target's windows, and its copies were as large as the store. That is
// safe because a series never writes over a point it holds: add drops
// points by moving the start, appends past the end of any slice handed
// out, and grows into a new array. Otherwise a copy sized to them.
func (r *series) since(t time.Time) []Point {
	i := len(r.points)
	for i > 0 && !r.points[i-1].Time.Before(t) {
		i--
	}
	n := 0
	for _, p := range r.points[:i] {
		if !p.Time.Before(t) {
			n++
		}
	}
	if n == 0 {
		return r.points[i:len(r.points):len(r.points)]
	}
	out := make([]Point, 0, n+len(r.points)-i)
	for _, p := range r.points {
		if !p.Time.Before(t) {
			out = append(out, p)
		}
	}
	return out
}

// Store keeps a window of points per target and scenario. It is safe for
// concurrent use: the monitor adds while scrapes evaluate. A series keeps
// the points of the last Keep before its newest, so that it holds what the
// curves read and no more whatever the daemon's uptime (an engine series
// gained a point every 30 s for 34 hours against a 6-hour curve window).
type Store struct {
	mu     sync.Mutex
	keep   time.Duration
	series map[[2]string]*series
}

// NewStore returns an empty store that keeps every point, up to MaxPoints
// a series, until Keep says otherwise.
func NewStore() *Store { return &Store{series: map[[2]string]*series{}} }

// Keep sets how long before its newest point a series keeps points: the
// longest curve window that reads it.
func (s *Store) Keep(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = d
}

// Add records a point.
func (s *Store) Add(target, scenario string, p Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{target, scenario}
	r, ok := s.series[k]
	if !ok {
		r = &series{}
		s.series[k] = r
	}
	r.add(p, s.keep)
}

// Window returns the points of a series at or after t, in the order added:
// read them, never change them, for they may be the store's own (since).
func (s *Store) Window(target, scenario string, t time.Time) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.series[[2]string{target, scenario}]
	if !ok {
		return nil
	}
	return r.since(t)
}

// Forget drops every series of a target.
func (s *Store) Forget(target string) {
	s.ForgetIf(func(t, _ string) bool { return t == target })
}

// ForgetIf drops every series whose target and scenario gone says are gone.
func (s *Store) ForgetIf(gone func(target, scenario string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.series {
		if gone(k[0], k[1]) {
			delete(s.series, k)
		}
	}
}
