// Package estimator keeps every target's probe points and turns them into
// capacity estimates for the configured use cases. The monitor records
// into it and asks it for calibration bursts; the collectors and the status
// API read its estimates.
package estimator

import (
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/monitor"
)

// Estimator is the capacity model of a running configuration.
type Estimator struct {
	store *capacity.Store
	// engine keeps each target's engine decode readings (Decoded), under
	// no scenario, for as long as the longest use case window.
	engine *capacity.Store
	memo   *capacity.Memo

	mu    sync.Mutex
	cfg   *config.Config
	seeds Seeds
	// kv is each target's KV cache in tokens as its engine last said: the
	// summary line asks without a reading, and the fit it would redo with
	// none is the one kept for the last (capacity.Memo).
	kv map[string]float64
	// targets are the configured targets' specs and cached estimates
	// (cache.go).
	targets map[string]*tstate
	// refreshing owns the background refreshes (cache.go's refresh), so
	// that Close can wait for them.
	refreshing sync.WaitGroup
}

// Close waits for the background refreshes in flight: call it once
// nothing records any more (after the monitor stopped).
func (e *Estimator) Close() { e.refreshing.Wait() }

// New returns an estimator for cfg and its bench seeds.
func New(cfg *config.Config, seeds Seeds) *Estimator {
	e := &Estimator{store: capacity.NewStore(), engine: capacity.NewStore(), memo: capacity.NewMemo(), cfg: cfg, seeds: seeds, kv: map[string]float64{}}
	e.store.Keep(longest(cfg, curveWindow))
	e.engine.Keep(longest(cfg, window))
	e.targets = e.specs(cfg, seeds)
	return e
}

// longest is the longest of a duration cfg's use cases each have. The
// store keeps the points of the longest curve window (older ones feed no
// curve), the engine's decode readings those of the longest window (how
// long they feed the ITL laws: Decoded).
func longest(cfg *config.Config, of func(config.UseCase) time.Duration) time.Duration {
	var d time.Duration
	for _, u := range cfg.UseCases {
		d = max(d, of(u))
	}
	return d
}

func curveWindow(u config.UseCase) time.Duration { return u.CurveWindow }
func window(u config.UseCase) time.Duration      { return u.Window }

// specs are cfg's targets' specs, each target's cache kept where its spec
// is unchanged (e.mu held, or e not yet shared). Targets whose specs are
// equal share one: a fleet's targets, found by one discovery template,
// would otherwise each hold a copy of every use case's configuration
// (4.5 MB at 1,000 targets).
func (e *Estimator) specs(cfg *config.Config, seeds Seeds) map[string]*tstate {
	out := make(map[string]*tstate, len(cfg.Targets))
	shared := map[specKey]spec{}
	for _, t := range cfg.Targets {
		k := keyOfSpec(cfg, seeds, t)
		s, ok := shared[k]
		if !ok {
			s = specOf(cfg, seeds, t)
			shared[k] = s
		}
		if old := e.targets[t.Name]; old != nil && reflect.DeepEqual(old.spec, s) {
			out[t.Name] = old
			continue
		}
		out[t.Name] = &tstate{spec: s}
	}
	return out
}

// Configure applies a reloaded configuration; the points of targets it no
// longer names, and of scenarios a target is no longer probed with, are
// forgotten. The cached estimates of a target whose use cases, scenarios
// and seed are unchanged are kept (cache.go): a fleet's discovery updates
// reconfigure every target.
func (e *Estimator) Configure(cfg *config.Config, seeds Seeds) {
	// Sets, not searches: a fleet's discovery updates reconfigure a
	// thousand targets, each once a minute.
	probed := map[[2]string]bool{}
	names := map[string]bool{}
	for _, t := range cfg.Targets {
		names[t.Name] = true
		for _, s := range cfg.ScenariosOf(t) {
			probed[[2]string{t.Name, s.Name}] = true
		}
	}
	e.mu.Lock()
	old := e.cfg
	e.cfg, e.seeds = cfg, seeds
	e.targets = e.specs(cfg, seeds)
	for _, t := range old.Targets {
		if !names[t.Name] {
			delete(e.kv, t.Name)
		}
	}
	e.mu.Unlock()
	e.store.Keep(longest(cfg, curveWindow))
	e.store.ForgetIf(func(target, scenario string) bool { return !probed[[2]string{target, scenario}] })
	e.engine.Keep(longest(cfg, window))
	e.engine.ForgetIf(func(target, _ string) bool { return !names[target] })
	for _, t := range old.Targets {
		if !names[t.Name] {
			e.memo.Forget(t.Name)
		}
	}
}

func (e *Estimator) state() (*config.Config, Seeds) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cfg, e.seeds
}

// Record implements monitor.Recorder: a successful probe becomes a point.
func (e *Estimator) Record(s monitor.Sample) {
	e.record(s)
	e.refresh(s.Target)
}

// record stores a probe's point.
func (e *Estimator) record(s monitor.Sample) {
	res := s.Result
	kv, held := s.KV, s.Held
	if !(kv >= 0 && held >= 0) {
		kv, held = 0, 0
	}
	p := capacity.Point{Time: s.Time, Load: s.Load, InFlight: s.InFlight, Sent: s.Sent, KV: kv, Held: held,
		TTFT: res.TTFT.Seconds(), E2E: res.E2E.Seconds(), ITL: res.ITL().Seconds(), Steady: res.SteadyITL().Seconds(), MaxGap: res.MaxGap.Seconds(), Decode: res.DecodeTPS(), Burst: s.Burst, Level: s.Level, Queued: s.Queued, Rise: s.Rise, Aftermath: s.Aftermath}
	if s.Lost {
		// How far its stream came, and no decode: it did not end.
		p.Lost, p.ITL, p.Steady, p.Decode = true, math.NaN(), math.NaN(), math.NaN()
	}
	e.store.Add(s.Target, s.Scenario, p)
	e.changed(s.Target)
}

// Decoded implements monitor.Recorder: the engine's own decode readings
// over production alone, a point of the ITL law at production's batch for
// every use case of the target (capacity.Point.Engine), its contexts
// counted by the KV term. Only where the engine says its KV usage: a
// reading is production's alone, none of its sequences of the use case's
// shape, and without the KV tokens its batch held, production's contexts
// would pass for the use case's (on the suite's servers whose decode
// answers to a request's own context, production's short ones read as a
// cheaper step than a 96K use case meets, and its capacity 2 to 4 times
// low). They come every 30 s (monitor.DecodeSpan) and ask for no fit of
// their own: the next probe's takes them, as a fit for each at a fleet's
// thousand targets would cost more than all its probes' fits.
func (e *Estimator) Decoded(target string, d monitor.Decode) {
	if !(d.KV >= 0) {
		return
	}
	e.engine.Add(target, "", capacity.Point{Time: d.Time, Engine: true, Load: d.Running, InFlight: d.Running, Sent: d.Running, KV: d.KV, Held: d.Running,
		ITL: d.ITL, Waiting: d.Waiting, Prompts: d.Prompts, TTFT: math.NaN(), E2E: math.NaN(), Decode: 1 / d.ITL})
}

// Burst implements monitor.Calibrator: of the target's use cases that want
// a calibration burst now, those first that have had none, then those
// without a capacity to go by (burstRank), and of each kind the cheapest
// burst (its prompt tokens). The budget pays for a burst by its length; one
// large burst for a use case that has an estimate would starve the others
// of theirs for an hour, and a 1K use case's search, cheap burst after
// cheap burst, left a 64K one with no burst in the hour. Where the decode
// data hold the use case's estimate back, each probe generates enough
// tokens that half the burst decodes together (capacity.BurstOutput).
// First: the burst is for a use case with no capacity to go by.
func (e *Estimator) Burst(target string, load engine.Load, maxBurst int) monitor.Burst {
	cfg, _ := e.state()
	best, bestRank, chosen, n := math.Inf(1), 3, -1, 0
	s, ests := e.estimates(target, load, time.Now(), false)
	for i, est := range ests {
		limit, _ := burstLimit(cfg, s, i, est, maxBurst)
		k := capacity.Burst(est, load.InFlight(), load.Waiting, limit)
		if k < 2 {
			continue
		}
		rank := burstRank(est)
		cost := float64(k * s.cus[i].InputTokens)
		if rank < bestRank || rank == bestRank && cost < best {
			chosen, n, best, bestRank = i, k, cost, rank
		}
	}
	if chosen < 0 {
		return monitor.Burst{}
	}
	u := s.us[chosen]
	return monitor.Burst{Scenario: u.Scenario, N: n, Output: capacity.BurstOutput(ests[chosen], n, s.probeOut[chosen], u.OutputTokens), First: bestRank < 2}
}

// burstRank orders use cases for the next burst: 0, no burst of two or
// more yet; 1, no capacity to go by (none, or a bound); 2, a capacity a
// burst refines. Report 000's short chatbot, its capacity taken from bursts
// of one and three, waited behind a 1K use case's refining bursts until the
// load rose for good.
func burstRank(est capacity.Estimate) int {
	switch {
	case !slices.ContainsFunc(est.Points, func(p capacity.Point) bool { return p.Burst > 1 }):
		return 0
	case math.IsNaN(est.Capacity):
		return 1
	}
	return 2
}

// burstLimit is the largest burst calibration may send use case i of s,
// whose estimate is est, and the setting that holds it there: maxBurst
// (calibration.max_burst), or the probe budget where it pays for fewer
// within the use case's window (affordable).
func burstLimit(cfg *config.Config, s spec, i int, est capacity.Estimate, maxBurst int) (int, string) {
	u := s.us[i]
	lengthens := capacity.Lengthens(est, s.probeOut[i], u.OutputTokens)
	if a := affordable(est.Points, cfg.ProbeBudget, u.Window, lengthens); a < maxBurst {
		return a, capacity.LimitBudget
	}
	return maxBurst, capacity.LimitMaxBurst
}

// limited says, on a bound, what keeps calibration from placing it: the
// setting that no burst can pass (Estimate.BurstLimitBy), once the bursts
// have reached its limit, or calibration off. A bound that only waits for
// a quiet moment or a probe is left as it is: its burst will come.
func limited(cfg *config.Config, s spec, i int, est *capacity.Estimate) {
	if est.Bound == "" {
		return
	}
	if !cfg.Calibration.Enabled {
		est.BurstLimitBy = capacity.LimitCalibrationOff
		return
	}
	if limit, by := burstLimit(cfg, s, i, *est, cfg.Calibration.MaxBurst); limit < 2 || capacity.Reached(*est) >= float64(limit) {
		est.BurstLimit, est.BurstLimitBy = max(limit, 0), by
	}
}

// affordable is the largest burst of a use case's scenario that the budget
// pays for within the use case's window. n prompts sent together keep the
// target busy about n times a lone probe's prefill (they queue for it) plus
// one decode, and the budget then holds every probe of the target back for
// busy/budget: a burst that silences the target for longer than a window
// leaves the window without probes. The prefill and decode are the
// quickest seen. A burst of 57 probes at 64K context was aimed at a use case
// whose capacity was 5, and paid for the next 80 minutes. Where its probes
// generate more tokens than the scenario's to decode together (lengthens,
// capacity.BurstOutput), the decode lasts about as long as half the first
// tokens take to come: n/2 times their spacing in the latest burst.
func affordable(points []capacity.Point, budget float64, window time.Duration, lengthens bool) int {
	prefill, decode := math.Inf(1), math.Inf(1)
	for _, p := range points {
		if !p.Lost {
			prefill, decode = math.Min(prefill, p.TTFT), math.Min(decode, p.E2E-p.TTFT)
		}
	}
	if len(points) == 0 || prefill <= 0 {
		return 0
	}
	spacing := 0.0
	if lengthens {
		spacing, _, _ = capacity.BurstSpacing(points)
	}
	return int((budget*window.Seconds() - decode) / (prefill + spacing/2))
}

// UseCases are the configured use cases, as the capacity model takes them.
func (e *Estimator) UseCases() []capacity.UseCase {
	cfg, _ := e.state()
	out := make([]capacity.UseCase, len(cfg.UseCases))
	for i, u := range cfg.UseCases {
		out[i] = useCase(u)
	}
	return out
}

// Estimates evaluates every target and use case of the configuration at
// now: each target's load is its engine's reading (NaN while its metrics
// are down), and each estimate says when its scenario is probed next. What
// has not changed since the last question is read from the cache
// (cache.go). The estimates' slices are shared: read them, never change
// them.
func (e *Estimator) Estimates(status []collector.TargetStatus, now time.Time) []capacity.Estimate {
	cfg, _ := e.state()
	byName := map[string]collector.TargetStatus{}
	for _, s := range status {
		byName[s.Name] = s
	}
	out := make([]capacity.Estimate, 0, len(cfg.Targets)*len(cfg.UseCases))
	for _, t := range cfg.Targets {
		s, ok := byName[t.Name]
		load := unread
		if ok && s.Up {
			load = s.Load
		}
		sp, ests := e.estimates(t.Name, load, now, false)
		for i, est := range ests {
			est.NextProbe = s.Next[est.Scenario]
			limited(cfg, sp, i, &est)
			out = append(out, est)
		}
	}
	return out
}

// Known implements monitor.Recorder: how many of the use cases have a
// capacity on the target now, of how many.
func (e *Estimator) Known(target string) (known, total int) {
	_, ests := e.estimates(target, unread, time.Now(), false)
	for _, est := range ests {
		if !math.IsNaN(est.Capacity) {
			known++
		}
	}
	return known, len(ests)
}

// Reset implements monitor.Recorder: the target's server restarted or
// changed, and what its probes said of it no longer holds.
func (e *Estimator) Reset(target string) {
	e.store.Forget(target)
	e.engine.Forget(target)
	e.memo.Forget(target)
	e.mu.Lock()
	delete(e.kv, target)
	e.mu.Unlock()
	e.changed(target)
}

func useCase(u config.UseCase) capacity.UseCase {
	return capacity.UseCase{Name: u.Name, Scenario: u.Scenario, Statistic: u.Statistic, Window: u.Window, OutputTokens: u.OutputTokens,
		TTFTMax: u.TTFTMax.Seconds(), E2EMax: u.E2EMax.Seconds(), ITLMax: u.ITLMax.Seconds(), DecodeMin: u.DecodeMinTPS}
}
