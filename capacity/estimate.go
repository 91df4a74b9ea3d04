package capacity

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// UseCase is what a use case demands: thresholds (0: not checked) judged on
// the statistic of a scenario's probes over a window.
type UseCase struct {
	Name, Scenario string
	Statistic      string
	Window         time.Duration
	// Recent is where the window begins: older points feed the curves,
	// not the window's statistic. Zero: every point is recent.
	Recent    time.Time
	TTFTMax   float64 // seconds
	E2EMax    float64 // seconds
	ITLMax    float64 // seconds
	DecodeMin float64 // tokens/s
	// InputTokens and OutputTokens are the shape of each of its "N
	// concurrent requests".
	InputTokens, OutputTokens int
	// Warm is true where its prompts share a prefix the engine may keep
	// cached (a scenario's cache: warm): its prefill alone then says
	// nothing of what a colder prompt's takes.
	Warm bool
	// KVTokens is the target's KV cache in tokens where its engine says
	// (engine.Load.KVTokens), 0 or NaN where not: it bounds how many of
	// them the server admits at once.
	KVTokens float64
	// Prior is what the target's other use cases say of this one's laws
	// (Pool of their Ratios); the zero Prior knows nothing.
	Prior Prior
	// Cost is the target's prefill cost against prompt length (Costs of
	// its use cases' Ratios), by which its levels count production's
	// prompts ahead; the zero Cost counts them by their tokens.
	Cost PrefillCost
}

// held is the KV-cache tokens a request of the use case's shape holds, on
// average over its decode: its prompt, and half its output (an engine
// such as vLLM takes blocks as tokens come; one that reserves the output
// on admission holds half an output more, a small share of a context
// whose prompt dominates it).
func (u UseCase) held() float64 { return float64(u.InputTokens) + float64(u.OutputTokens)/2 }

// weighed is points with production's prompts in their levels counted by
// their cost (PrefillCost.weigh); a warm prefix's as they are, whose own
// prefill is not what its length costs.
func (u UseCase) weighed(points []Point) []Point {
	if u.Warm {
		return points
	}
	return u.Cost.weigh(points, float64(u.InputTokens))
}

// Weighs says whether any prefill cost moves the use case's points
// (weighed): where none does, what it reads from them (Ratios, the
// estimate's fits) is the same at every Cost.
func (u UseCase) Weighs(points []Point) bool {
	return !u.Warm && u.InputTokens > 0 && slices.ContainsFunc(points, weighable)
}

// SLO is one threshold of a use case, as exported in headroom_slo_threshold.
type SLO struct {
	Name      string  `json:"slo"` // ttft_seconds, e2e_seconds, itl_seconds, decode_tokens_per_second
	Threshold float64 `json:"threshold"`
	// Value is the window's statistic over its lone probes. Margin is
	// the relative distance to the threshold of what one more request of
	// the use case's shape would meet at the load now, by the fitted
	// model, once it has an estimate (Estimate.Margin), and of Value
	// before: the two then differ wherever production's load now is not
	// the load the window's probes met.
	Value  float64 `json:"value"`
	Margin float64 `json:"margin"`
	// Capacity is the number of requests of the use case's shape sent
	// together at which the SLO's fitted law reaches the threshold, Lower
	// and Upper where its 95% confidence band does (+Inf: never); NaN
	// when the law cannot be sloped yet (Why).
	Capacity float64 `json:"capacity"`
	Lower    float64 `json:"capacity_lower"`
	Upper    float64 `json:"capacity_upper"`
	// Curve is the fitted law for N requests together, for charts.
	Curve Curve  `json:"curve"`
	Why   string `json:"why,omitempty"`
}

// Estimate is the state of one target and use case.
type Estimate struct {
	Target   string `json:"target"`
	UseCase  string `json:"use_case"`
	Scenario string `json:"scenario"`
	// Capacity is how many requests of the use case's shape sent together
	// meet every threshold, by the fitted engine model (model.go); NaN when
	// the data cannot place it (Why). Lower and Upper bound it from the
	// fit's uncertainty (Upper +Inf where nothing bounds it from above).
	// Bound is "lower" where the data cannot place the threshold: Capacity
	// is then NaN and Lower is all that is known; "" otherwise.
	Capacity float64 `json:"capacity"`
	Lower    float64 `json:"capacity_lower"`
	Upper    float64 `json:"capacity_upper"`
	Bound    string  `json:"bound,omitempty"`
	// Aim is where the fitted laws cross a threshold, placed or not, as
	// far as it is searched: one past Reach (the constant) times Reach
	// (the field), so a crossing further off reads as that, meaning at
	// least it (the search to the bounds' horizon moved calibration and
	// was not kept: docs/capacity.md). Reach is the most requests together
	// their data hold: a bound's "at least" and where calibration goes
	// next. NaN or 0 before the laws have slopes.
	Aim   float64 `json:"aim"`
	Reach float64 `json:"reach"`
	// Load is the requests in flight now (of every shape), NaN if unknown.
	// Free is how many more requests of the use case's shape fit on top
	// of them, Ratio Free over Capacity, Margin what one more request
	// would meet against each threshold (< 0: breached), all from the same
	// laws. Free and Ratio are NaN for a bound.
	Load   float64 `json:"load"`
	Free   float64 `json:"free"`
	Ratio  float64 `json:"ratio"`
	Margin float64 `json:"margin"` // smallest SLO margin over the window; < 0: breached
	// Samples is how many observations (lone probes, bursts, bench
	// cells) the window holds, SamplesNeeded how many a law needs, and
	// NextProbe when the scenario is next probed (set by the daemon).
	Samples       int       `json:"samples"`
	SamplesNeeded int       `json:"samples_needed"`
	NextProbe     time.Time `json:"next_probe,omitzero"`
	// BurstLimit is, for a bound, the largest burst calibration may send
	// this use case, once its bursts have reached it, and BurstLimitBy
	// the setting that holds it there: LimitMaxBurst, or LimitBudget where
	// the budget pays for no larger burst within the use case's window;
	// LimitCalibrationOff (BurstLimit 0) where calibration is off. No
	// burst will then place the threshold: only production's own load
	// going further, or the setting raised (set by the estimator, which
	// knows them).
	BurstLimit   int    `json:"burst_limit,omitempty"`
	BurstLimitBy string `json:"burst_limit_by,omitempty"`
	// Seed counts the bench points the estimate also rests on; 0: probes alone.
	Seed   int     `json:"seed_points,omitempty"`
	Why    string  `json:"why,omitempty"`
	SLOs   []SLO   `json:"slos"`
	Points []Point `json:"points"`
	// fit is the fit the estimate was read from (nil: none), for At.
	fit *fitted
}

// Production is what runs on a target besides the probes, as its engine
// says now: the requests in flight (NaN: unknown), how many of them wait on
// average (a snapshot's waiting prompt is not a standing queue), and the
// KV-cache tokens its running ones hold (0 or NaN where the engine does not
// say: its requests then count as the use case's shape).
type Production struct{ InFlight, Waiting, KV float64 }

// Unknown is a Production the engine has said nothing of.
var Unknown = Production{InFlight: math.NaN(), Waiting: math.NaN(), KV: math.NaN()}

// DecodeShort says the estimate has no capacity for want of decode data: a
// decode threshold binds past the ITL law's reach, the sequences the probes
// decoded beside, which is short of the prompts the bursts sent together;
// or the bursts' probes never decoded together at all, and the ITL law has
// no slope. A burst whose probes generate more tokens reaches further
// (BurstOutput).
func (e Estimate) DecodeShort() bool { return e.fit != nil && e.fit.decodeShort }

// BoundsOne says the estimate is a lower bound of one request or more.
// Under one, the data have not placed a single request of the shape, and
// what shows it says so rather than count a fraction ("≥ 0.0").
func (e Estimate) BoundsOne() bool { return e.Bound != "" && e.Lower >= 1 }

// Shown is the capacity as the status page and replay write it: the
// estimate, a lower bound as "≥ lower", one under a request as "not
// placed", and "-" where there is neither.
func (e Estimate) Shown() string {
	switch {
	case e.BoundsOne():
		return fmt.Sprintf("≥ %.1f", e.Lower)
	case e.Bound != "":
		return "not placed"
	case math.IsNaN(e.Capacity) || math.IsInf(e.Capacity, 0):
		return "-"
	}
	return fmt.Sprintf("%.1f", e.Capacity)
}

// At is the estimate read at another production from the fit it was read
// from: what the evaluation that gave e would have given with it, with e
// read at Unknown. Only the load, the free requests, the ratio and the
// margins answer to production; the window, the fit and the capacity do
// not, and are not evaluated again. Its SLOs are e's, copied where their
// margins answer to production: a bound's or an unsloped law's share
// e's, as 5,000 estimates kept at two loads in the daemon's cache do.
func (e Estimate) At(now Production) Estimate {
	e.Load = now.InFlight
	if e.fit == nil || !e.fit.reads(now) {
		return e
	}
	e.SLOs = slices.Clone(e.SLOs)
	e.fit.read(&e, now)
	return e
}

// SLOs lists a use case's configured thresholds.
func (u UseCase) SLOs() []SLO {
	var out []SLO
	add := func(name string, v float64) {
		if v > 0 {
			out = append(out, SLO{Name: name, Threshold: v})
		}
	}
	add("ttft_seconds", u.TTFTMax)
	add("e2e_seconds", u.E2EMax)
	add("itl_seconds", u.ITLMax)
	add("decode_tokens_per_second", u.DecodeMin)
	return out
}

// Of is the value a point has of the SLO's metric.
func (s SLO) Of(p Point) float64 {
	switch s.Name {
	case "ttft_seconds":
		return p.TTFT
	case "e2e_seconds":
		return p.E2E
	case "itl_seconds":
		return p.ITL
	}
	return p.Decode
}

// Evaluate estimates a use case from its window's points with the
// production now: the engine model (model.go) fitted to the window, solved
// for N requests of the use case's shape together.
func Evaluate(target string, u UseCase, points []Point, now Production) Estimate {
	return (*Memo)(nil).evaluate(target, u, points, now, "")
}

// evaluate is Evaluate with the memo's fits, kept under slot beside the
// target and use case.
func (m *Memo) evaluate(target string, u UseCase, points []Point, now Production, slot string) Estimate {
	// The engine's own readings (Point.Engine) feed the ITL law; the
	// points shown, counted and judged for the margins are the probes'.
	probes := kept(points, func(p Point) bool { return !p.Engine })
	e := Estimate{Target: target, UseCase: u.Name, Scenario: u.Scenario, Capacity: math.NaN(), Lower: math.NaN(), Upper: math.NaN(), Aim: math.NaN(),
		Load: now.InFlight, Free: math.NaN(), Ratio: math.NaN(), Margin: math.NaN(), SamplesNeeded: MinSamples, Points: probes}
	e.SLOs = u.SLOs()
	if len(probes) == 0 {
		e.Why = "no successful probe in the window"
		return e
	}
	os := observations(u.weighed(points), u.held())
	e.Samples = len(os) - (len(points) - len(probes))
	// Until the laws are placed, the margin is the window's statistic over
	// the lone probes: what users met at the loads production made.
	var lone []Point
	for _, p := range probes {
		if !p.Time.Before(u.Recent) && p.Burst <= 1 && p.Cell == 0 && !p.Aftermath {
			lone = append(lone, p)
		}
	}
	e.Margin = math.Inf(1)
	for i := range e.SLOs {
		s := &e.SLOs[i]
		s.Capacity, s.Lower, s.Upper = math.NaN(), math.NaN(), math.NaN()
		s.Value = Statistic(values(lone, s.Of), u.Statistic)
		s.Margin = (s.Threshold - s.Value) / s.Threshold
		if s.Name == "decode_tokens_per_second" {
			s.Margin = -s.Margin
		}
		e.Margin = math.Min(e.Margin, s.Margin)
	}
	if math.IsNaN(e.Margin) || math.IsInf(e.Margin, 1) {
		e.Margin = math.NaN()
	}
	e.fit = m.fit([3]string{target, u.Name, slot}, u, points, os)
	e.fit.apply(&e, now)
	return e
}

// kept is a copy of the points keep holds, sized to them: an estimate
// holds its own (Estimate.Points) until the next refit, and a fleet holds
// every target's and use case's at once.
func kept(points []Point, keep func(Point) bool) []Point {
	n := 0
	for _, p := range points {
		if keep(p) {
			n++
		}
	}
	out := make([]Point, 0, n)
	for _, p := range points {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func values(points []Point, value func(Point) float64) []float64 {
	out := make([]float64, 0, len(points))
	for _, p := range points {
		if v := value(p); !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// Seeded evaluates with a benchmark's points (a `headroom bench` run of the
// same server: cells of requests sent together) as a prior: while the
// window's probes alone cannot carry an estimate, probes and bench points
// together do. The margins stay those of the probes at the current load.
func (m *Memo) Seeded(target string, u UseCase, points, seed []Point, now Production) Estimate {
	e := m.evaluate(target, u, points, now, "")
	if !math.IsNaN(e.Capacity) || len(seed) == 0 {
		return e
	}
	s := m.evaluate(target, u, append(append([]Point(nil), seed...), points...), now, "seed")
	if math.IsNaN(s.Capacity) {
		return e
	}
	s.Samples, s.Points, s.Seed = e.Samples, e.Points, len(seed)
	s.Why = "capacity from the bench seed and probes; probes alone: " + e.Why
	return s
}

// The settings that hold calibration back (Estimate.BurstLimitBy), named
// as the configuration names them: the status page tells the operator
// which to raise.
const (
	LimitMaxBurst       = "calibration.max_burst"
	LimitBudget         = "probe_budget"
	LimitCalibrationOff = "calibration.enabled"
)
