package estimator

import (
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
)

// The estimates are cached per target, so that a /metrics scrape, the
// status page and the calibrator's question before each probe read what
// the last change computed, instead of fitting every target's use cases
// again at each of them: at 1,000 targets, the fits' inputs (each use
// case's window copied, the laws each gives the others as a prior) were a
// scrape's 117 MB allocated (docs/operations.md, "A fleet"). A cached
// estimate is exactly what a fresh evaluation would return at the same
// moment: a target's are recomputed
//
//   - when its points change: a probe recorded (Record, which has them
//     recomputed in the background at once: refresh), the target reset
//     (Reset), its use cases, scenarios or seed changed by a reload or a
//     discovery update (Configure);
//   - when one of its points leaves a use case's window or curve window
//     by age: the inputs hold until the first moment one does (inputs.last);
//   - when its KV cache reading changes (it bounds the fitted capacity);
//   - when asked at a time before the one they were read at;
//   - and, for the free requests, ratio and margins, which answer to the
//     load, whenever the engine's load reading differs from the one they
//     were read at: the fits, windows and priors are then kept, and only
//     the reading at the load is redone (capacity.Estimate.At).

// tstate is a configured target's cache. Configure replaces it when the
// target's spec changes, and drops it with the target: a computation that
// began before finds another tstate, or another gen, and keeps nothing.
type tstate struct {
	spec    spec
	gen     uint64 // bumped whenever the target's points change
	entry   *entry
	pending bool // a refresh is on its way (refresh)
}

// spec is what a target's estimates rest on in the configuration: its use
// cases (those whose scenario it is probed with), as the model takes them,
// their bench seeds, and the tokens their scenarios' probes generate.
type spec struct {
	us       []config.UseCase
	cus      []capacity.UseCase // without Recent, KVTokens and Prior, which the points and load set
	seeds    [][]capacity.Point
	probeOut []int
}

func specOf(cfg *config.Config, seeds Seeds, t config.Target) spec {
	var s spec
	for _, u := range cfg.UseCases {
		if !t.Probes(u.Scenario) {
			continue
		}
		cu, out := useCase(u), 0
		for _, sc := range cfg.Scenarios {
			if sc.Name == u.Scenario {
				cu.InputTokens, cu.Warm, out = sc.InputTokens, sc.Cache == "warm", sc.OutputTokens
			}
		}
		s.us, s.cus, s.seeds = append(s.us, u), append(s.cus, cu), append(s.seeds, seeds[t.Name][u.Scenario])
		s.probeOut = append(s.probeOut, out)
	}
	return s
}

// specKey is what a target's spec rests on besides the configuration:
// which of its use cases the target is probed with, and its seeds (one map
// per seed file, shared by the targets that name it: LoadSeeds).
type specKey struct {
	probed string // per use case of the configuration, 1 where probed
	seeds  uintptr
}

func keyOfSpec(cfg *config.Config, seeds Seeds, t config.Target) specKey {
	probed := make([]byte, len(cfg.UseCases))
	for i, u := range cfg.UseCases {
		probed[i] = '0'
		if t.Probes(u.Scenario) {
			probed[i] = '1'
		}
	}
	return specKey{probed: string(probed), seeds: reflect.ValueOf(seeds[t.Name]).Pointer()}
}

// entry is when a target's model inputs were read and how long they hold,
// its estimates at an unknown load (NaN), and at the load they were last
// read at. The inputs themselves are not kept: once the estimates are
// made from them, only whether they still hold is read again, and their
// use cases (each with its prior) were 1.2 MB at 1,000 targets.
type entry struct {
	in   validity
	base []capacity.Estimate
	at   loadKey
	ests []capacity.Estimate
}

// validity is what says whether inputs read at a time still hold: the KV
// cache they were read with, and the span of time over which no point
// enters or leaves a window.
type validity struct {
	kv   float64
	from time.Time // when they were read
	last time.Time // the last moment at which no point has left a window since
}

// inputs are the model's inputs of a target's use cases read at a time:
// each use case with its prior and KV cache, and its curve window's points.
type inputs struct {
	validity
	cus    []capacity.UseCase
	points [][]capacity.Point
}

// loadKey is what an estimate reads of the load: the requests in flight,
// of them waiting, and the KV tokens they hold (NaN, unknown, equal to
// itself here).
type loadKey struct{ inFlight, waiting, kv uint64 }

func keyOf(p capacity.Production) loadKey {
	return loadKey{math.Float64bits(p.InFlight), math.Float64bits(p.Waiting), math.Float64bits(p.KV)}
}

// production is what the engine's reading says runs on the target now: of
// its requests in flight, as many wait as wait on average (a request
// arriving at any moment meets the time average), the rest decode.
func production(l engine.Load) capacity.Production {
	return capacity.Production{InFlight: l.InFlight(), Waiting: math.Min(l.Queue, l.InFlight()), KV: l.KVUsage * l.KVTokens}
}

// unread is the load of a target whose engine has said nothing.
var unread = engine.Load{Running: math.NaN(), Waiting: math.NaN(), KVUsage: math.NaN(), KVTokens: math.NaN()}

// holds says whether the inputs are still those of now with the KV cache kv.
func (in validity) holds(kv float64, now time.Time) bool {
	return math.Float64bits(in.kv) == math.Float64bits(kv) && !now.Before(in.from) && !now.After(in.last)
}

// forever is a time no point's window reaches.
var forever = time.Unix(1<<62, 0)

// read reads the model's inputs of a target at now: each use case's curve
// window, and the prior that its other use cases give it. A target's use
// cases are evaluated together: each one's laws take what the others' data
// say of their slopes as a prior (capacity.Pool), so that a burst of a
// cheap short prompt informs a long one's capacity before its own costly
// bursts come.
func (e *Estimator) read(target string, s spec, kv float64, now time.Time) *inputs {
	in := &inputs{validity: validity{kv: kv, from: now, last: forever}, cus: slices.Clone(s.cus), points: make([][]capacity.Point, len(s.us))}
	ratios := make([]capacity.Slopes, len(s.us))
	window := make([][]capacity.Point, len(s.us)) // the seeds and the window's points, as Ratios reads them
	weighs := make([]bool, len(s.us))             // whether a cost moves its points (capacity.UseCase.Weighs)
	for i, u := range s.us {
		in.cus[i].KVTokens = kv
		in.cus[i].Recent = now.Add(-u.Window)
		in.points[i] = e.store.Window(target, u.Scenario, now.Add(-u.CurveWindow))
		if dec := e.engine.Window(target, "", now.Add(-u.Window)); len(dec) > 0 {
			in.points[i] = slices.Concat(in.points[i], dec)
		}
		window[i] = append(slices.Clone(s.seeds[i]), in.points[i]...)
		ratios[i] = capacity.Ratios(in.cus[i], window[i])
		weighs[i] = in.cus[i].Weighs(window[i])
		// A point is in a window while now is at most its time plus the
		// window (Store.Window and the margins' Recent: at or after now
		// less the window).
		for _, p := range in.points[i] {
			if p.Engine {
				continue // taken at the probes' pace (Decoded), not on their own
			}
			for _, d := range [2]time.Duration{u.CurveWindow, u.Window} {
				if t := p.Time.Add(d); t.Before(in.last) && !t.Before(now) {
					in.last = t
				}
			}
		}
	}
	// The use cases' lone prefills measure what a prompt costs against its
	// length, by which the levels count production's prompts ahead
	// (capacity.PrefillCost); the slopes are read again with it, which
	// moves the prefills and the lag they are read by, until the cost
	// settles (capacity.Settled). A length counts only where every pass
	// admitted it: one whose intercept stands above the lag only when its
	// own cost weighs the levels is not measured apart from it, and would
	// come and go pass after pass (the demo's 96K coding assistant did,
	// until the passes ran out, at an even count with it and at an odd
	// one without).
	//
	// Three readings in a row at the same lengths are taken on to the cost
	// they close on (capacity.Extrapolate, Steffensen's method), which the
	// next pass checks: a pass closes only part of the gap where a use
	// case's lone probes amid production outweigh its bursts, and a cost
	// can swing about its reading instead (the demo's 32K chatbot's, by 4%
	// each pass).
	var cost capacity.PrefillCost
	var run []capacity.PrefillCost // readings in a row, each with the one before
	for pass := range costPasses {
		next := capacity.Costs(ratios)
		if pass > 0 {
			next = next.At(cost.Tokens)
		}
		if next.Settled(cost) {
			break
		}
		if len(run) > 0 && !slices.Equal(run[0].Tokens, next.Tokens) {
			run = nil
		}
		cost, run = next, append(run, next)
		if len(run) == 3 {
			cost, run = capacity.Extrapolate(run[0], run[1], run[2]), nil
		}
		// A use case whose points no cost moves (no probe of it counted
		// production's prompts ahead: an idle target's) reads the same
		// slopes at every cost, and only the others are read again: a
		// refit of BenchmarkEstimates' 1,000 idle targets, whose lone
		// probes place the cost, took 1.89 s and 2.35 GB, now 1.12 s and
		// 1.47 GB, the estimates the same.
		for i := range s.us {
			in.cus[i].Cost = cost
			if weighs[i] {
				ratios[i] = capacity.Ratios(in.cus[i], window[i])
			}
		}
	}
	for i := range s.us {
		in.cus[i].Prior = capacity.Pool(slices.Delete(slices.Clone(ratios), i, i+1), ratios[i])
	}
	return in
}

// costPasses is the most times the slopes are read again with the prefill
// cost they imply: a bound on the time, not a tolerance. Where a use case's
// lone probes amid production outweigh its bursts, each pass closes only
// part of the gap: the chat of TestLevelsCountProductionsPromptsByTheirCost
// reads 0.191 s a prompt ahead by tokens, after eight plain passes 0.131,
// and with the readings taken on to what they close on (Extrapolate) 0.123,
// against its law's 0.125. Where two prompt lengths' costs are not known
// no pass runs; where the engine does not say production's prompt, the
// first moves no level and the cost is settled after it.
const costPasses = 8

// estimates returns a target's estimates at the engine's reading load (the
// requests in flight, of them waiting, the KV cache they hold and its size
// in tokens where the engine says) and now: from its cache where nothing
// they rest on has changed since (the list at the top of this file). The
// slice and what it holds are shared with other callers: read them, never
// change them.
//
// fill: only where the target has no entry (refresh), returning nil where
// it has one.
func (e *Estimator) estimates(target string, load engine.Load, now time.Time, fill bool) (spec, []capacity.Estimate) {
	prod, kvTokens := production(load), load.KVTokens
	key := keyOf(prod)
	e.mu.Lock()
	ts := e.targets[target]
	if ts == nil {
		e.mu.Unlock()
		return spec{}, nil
	}
	// The KV cache as the engine last said: a question without a reading
	// (the summary line's) reads the last one.
	if kvTokens > 0 {
		e.kv[target] = kvTokens
	}
	kv, gen, c := e.kv[target], ts.gen, ts.entry
	if fill && c != nil {
		e.mu.Unlock()
		return ts.spec, nil
	}
	var valid validity
	var base []capacity.Estimate
	cached := c != nil && c.in.holds(kv, now)
	if cached {
		if c.at == key {
			e.mu.Unlock()
			return ts.spec, c.ests
		}
		valid, base = c.in, c.base
	}
	e.mu.Unlock()
	if !cached {
		in := e.read(target, ts.spec, kv, now)
		valid = in.validity
		base = make([]capacity.Estimate, len(ts.spec.us))
		for i := range ts.spec.us {
			base[i] = e.memo.Seeded(target, in.cus[i], in.points[i], ts.spec.seeds[i], capacity.Unknown)
		}
	}
	out := make([]capacity.Estimate, len(base))
	for i, b := range base {
		out[i] = b.At(prod)
	}
	e.mu.Lock()
	// Kept unless the points changed meanwhile; a refresh keeps what a
	// question stored since it began.
	if e.targets[target] == ts && ts.gen == gen && (!fill || ts.entry == nil) {
		ts.entry = &entry{in: valid, base: base, at: key, ests: out}
	}
	e.mu.Unlock()
	return ts.spec, out
}

// refresh computes a target's estimates again in the background once its
// points have changed, so that the next scrape, status page or calibration
// decision reads them from the cache, and only a new load's reading is
// left to it: a scrape after the fleet's probes had otherwise fitted the
// model of every target probed since the last (1.1 GB and 2.2 s at 1,000
// targets, BenchmarkEstimates/probed). The probes of a burst, recorded
// one after the other, mostly share one refresh.
func (e *Estimator) refresh(target string) {
	e.mu.Lock()
	ts := e.targets[target]
	if ts == nil || ts.pending {
		e.mu.Unlock()
		return
	}
	ts.pending = true
	e.mu.Unlock()
	e.refreshing.Go(func() {
		e.mu.Lock()
		ts.pending = false // a probe recorded from here on asks for another
		e.mu.Unlock()
		// Nothing where a question that came first computed them since.
		e.estimates(target, unread, time.Now(), true)
	})
}

// changed marks a target's points changed: its cached estimates are
// recomputed at the next question.
func (e *Estimator) changed(target string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ts := e.targets[target]; ts != nil {
		ts.gen++
		ts.entry = nil
	}
}
