package capacity

import (
	"fmt"
	"maps"
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
	// Overhead is the part of one request's TTFT, in seconds, that
	// requests sent together do not queue for (HTTP, tokenizing,
	// scheduling): the target's, from Overhead. 0 where not known.
	Overhead float64
}

// Limits of the estimate.
const (
	MinSamples = 8   // probes in the window before a capacity is estimated
	MinSpread  = 2.0 // observed loads must span at least this many requests
	// MinBurstSpread is MinSpread for bursts: a burst's level is one cell of
	// a report, set by the burst, not a wandering load; a burst of two
	// beside a burst of one already gives TTFT's slope, at a long context
	// for a third less than a burst of three.
	MinBurstSpread = 1.0
	Reach          = 2.0 // extrapolate at most to this multiple of the highest observed load
)

// SLO is one threshold of a use case, as exported in headroom_slo_threshold.
type SLO struct {
	Name      string  `json:"slo"` // ttft_seconds, e2e_seconds, itl_seconds, decode_tokens_per_second
	Threshold float64 `json:"threshold"`
	// Value is the window's statistic, Margin its relative distance to the threshold.
	Value  float64 `json:"value"`
	Margin float64 `json:"margin"`
	// Capacity is the load at which the steady-state curve reaches the
	// threshold, BurstCapacity the same on the burst curve (see Evaluate);
	// +Inf when the curve stays within it, NaN when it cannot be fitted (Why).
	Capacity      float64 `json:"capacity"`
	Curve         Curve   `json:"curve"`
	Why           string  `json:"why,omitempty"`
	BurstCapacity float64 `json:"burst_capacity"`
	BurstCurve    Curve   `json:"burst_curve"`
	BurstWhy      string  `json:"burst_why,omitempty"`
}

// Estimate is the state of one target and use case.
type Estimate struct {
	Target   string  `json:"target"`
	UseCase  string  `json:"use_case"`
	Scenario string  `json:"scenario"`
	Capacity float64 `json:"capacity"` // the lower of the two below that is known; NaN: see Why
	// Lower and Upper bound the capacity from the fit's uncertainty
	// (Upper +Inf where nothing bounds it from above). Bound is "lower"
	// where the data cannot place the threshold: Capacity is then NaN and
	// Lower is all that is known; "" for an estimate.
	Lower float64 `json:"capacity_lower"`
	Upper float64 `json:"capacity_upper"`
	Bound string  `json:"bound,omitempty"`
	// SteadyCapacity rests on lone probes, BurstCapacity on requests sent
	// together (see Evaluate).
	SteadyCapacity float64 `json:"steady_capacity"`
	BurstCapacity  float64 `json:"burst_capacity"`
	Load           float64 `json:"load"` // requests in flight now, NaN if unknown
	Free           float64 `json:"free"`
	Ratio          float64 `json:"ratio"`
	Margin         float64 `json:"margin"` // smallest SLO margin over the window; < 0: breached
	// Samples is how many lone probes the window holds and SamplesNeeded
	// how many it needs before a steady estimate, NextProbe when the
	// scenario is next probed (set by the daemon; zero when not known):
	// how far the use case is from an estimate. Samples counts what
	// SamplesNeeded does: a burst's probes, the engine's readings and a
	// burst's aftermath are no lone probes.
	Samples       int       `json:"samples"`
	SamplesNeeded int       `json:"samples_needed"`
	NextProbe     time.Time `json:"next_probe,omitzero"`
	// Seed counts the bench points the estimate also rests on; 0: probes alone.
	Seed int `json:"seed_points,omitempty"`
	// OneLevel says the burst capacity rests on requests sent together at
	// one level only, with TTFT taken as proportional to the level past it
	// (burstCurve): a bound on the early side that bursts at other levels
	// replace.
	OneLevel bool `json:"one_level,omitempty"`
	// Overhead is the use case's (UseCase.Overhead): what a bound from
	// one level does not multiply.
	Overhead float64 `json:"ttft_overhead_s,omitempty"`
	Why      string  `json:"why,omitempty"`
	SLOs     []SLO   `json:"slos"`
	Points   []Point `json:"points"`
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

func metric(name string) (value func(Point) float64, increasing bool) {
	switch name {
	case "ttft_seconds":
		return func(p Point) float64 { return p.TTFT }, true
	case "e2e_seconds":
		return func(p Point) float64 { return p.E2E }, true
	case "itl_seconds":
		return func(p Point) float64 { return p.ITL }, true
	}
	return func(p Point) float64 { return p.Decode }, false
}

// Of is the value a point has of the SLO's metric.
func (s SLO) Of(p Point) float64 {
	value, _ := metric(s.Name)
	return value(p)
}

// Evaluate estimates a use case from its window's points at the current load.
// Two curves come out of the same window. The steady-state curve rests on lone
// probes, each at the load production made: what a request arriving among
// independent users meets. The burst curve rests on requests sent together
// (a calibration burst, a bench cell, or a lone probe that met no other
// prefill, a burst of one): what the reference reports measure, N requests
// queued at the same instant. Queued together, N prefills delay one another,
// so the burst capacity is the lower; the estimate is the lower of the two
// that are known.
func Evaluate(target string, u UseCase, points []Point, load float64) Estimate {
	points, eng := engineReadings(points)
	e := Estimate{Target: target, UseCase: u.Name, Scenario: u.Scenario, Capacity: math.NaN(), Lower: math.NaN(), Upper: math.NaN(),
		SteadyCapacity: math.NaN(), BurstCapacity: math.NaN(), Load: load,
		Free: math.NaN(), Ratio: math.NaN(), Margin: math.NaN(), SamplesNeeded: MinSamples, Points: points,
		Overhead: u.Overhead}
	e.SLOs = u.SLOs()
	if len(points) == 0 {
		e.Why = "no successful probe in the window"
		return e
	}
	lone, together := split(points)
	e.Samples = len(lone)
	bursts := slices.ContainsFunc(points, func(p Point) bool { return p.Burst > 1 })
	steadyShort := steadyEnough(lone)
	oneLevel := len(together) > 0 && burstEnough(together) != ""
	// The probes that say how the use case's decode compares with the
	// engine's: those that decoded as production does, the lone ones and
	// the last of each burst (settled). A burst's earlier probes decoded
	// between its later prompts' prefill chunks, at a tenth of the speed
	// in the simulator of report 002 at 64K, and dragged the readings'
	// curve down with them.
	decoders := append([]Point(nil), lone...)
	for _, p := range settled(together) {
		if p.Burst > 1 || p.Cell > 0 {
			decoders = append(decoders, p)
		}
	}
	held := math.Max(highest(points), highest(eng))
	e.Margin = math.Inf(1)
	for i := range e.SLOs {
		s := &e.SLOs[i]
		value, increasing := metric(s.Name)
		s.Value = Statistic(values(recent(lone, u.Recent), value), u.Statistic)
		engDecode := engineDecode(s.Name, eng, decoders)
		s.Capacity, s.Curve, s.Why = solve(steadyCurve(s.Name, lone, engDecode, u.Statistic), increasing, s.Threshold, steadyShort)
		curve, short := burstCurve(s.Name, together, engDecode, u.Statistic, u.Overhead)
		reach := burstReach(s.Name)
		if oneLevel && len(curve) > 0 && (s.Name == "ttft_seconds" || s.Name == "e2e_seconds") {
			// The bound knows nothing of what stops a server short of its
			// compute (the KV cache filling): followed only to Reach times
			// the most requests the server was seen to hold.
			reach = Reach * held / curve[len(curve)-1].Load
		}
		// Requests sent together queue for one prefill compute: their TTFT
		// grows at least linearly with their level (production's decode
		// steps between the chunks, a full KV cache's queue only add), so
		// the line between two levels reaches the threshold at or before
		// the curve does, however far apart they lie. Splitting their
		// ratio instead (between) put report 000's chatbot at 6.4 from a
		// bracket of 2 and 11.5 where the line gives 8.3 (the report: 8).
		s.BurstCapacity, s.BurstCurve, s.BurstWhy = solveReach(curve, increasing, s.Name == "ttft_seconds", s.Threshold, short, reach)
		// The margin is at the current load: the steady curve's value there
		// once the curve is known, so that margin and capacity tell one
		// story; until then the window's statistic, over the loads
		// production made.
		now := s.Value
		if !math.IsNaN(s.Capacity) && !math.IsNaN(load) && len(s.Curve) > 0 {
			now = s.Curve.at(load)
		}
		if increasing {
			s.Margin = (s.Threshold - now) / s.Threshold
		} else {
			s.Margin = (now - s.Threshold) / s.Threshold
		}
		e.Margin = math.Min(e.Margin, s.Margin)
	}
	var steadyWhy, burstWhy string
	e.SteadyCapacity, steadyWhy = lowest(e.SLOs, func(s SLO) (float64, Curve, string) { return s.Capacity, s.Curve, s.Why })
	e.BurstCapacity, burstWhy = lowest(e.SLOs, func(s SLO) (float64, Curve, string) { return s.BurstCapacity, s.BurstCurve, s.BurstWhy })
	switch {
	case math.IsNaN(e.BurstCapacity):
		e.Capacity = e.SteadyCapacity
	case math.IsNaN(e.SteadyCapacity):
		e.Capacity, e.OneLevel = e.BurstCapacity, oneLevel
	case oneLevel:
		// The one level's bound says only that the burst capacity is at
		// least that: it cannot lower a measured steady-state curve.
		e.Capacity = e.SteadyCapacity
	default:
		e.Capacity = math.Min(placed(e.SLOs), e.BurstCapacity)
	}
	if math.IsNaN(e.Capacity) {
		e.Why = steadyWhy
		if bursts {
			e.Why += "; bursts: " + burstWhy
		}
	}
	// Where the margin is breached, no request more fits, whatever a curve
	// says: the capacity is at most the load now, and free and ratio
	// follow. The steady curve's margin agrees with its capacity by
	// construction; this holds the rest (a margin from the window's
	// statistic beside a burst capacity) to it. A margin of -0.41 beside a
	// ratio of 0.88 was seen on a real server after calibration bursts.
	if e.Margin < 0 && !math.IsNaN(load) && e.Capacity > load {
		e.Capacity = load
		e.Why = fmt.Sprintf("the margin is breached at the current load (%.2f): capacity held at the load", e.Margin)
	}
	e.Lower, e.Upper = e.Capacity, e.Capacity
	if !math.IsNaN(e.Capacity) && !math.IsNaN(load) {
		e.Free = e.Capacity - load
		if e.Capacity > 0 {
			e.Ratio = 1 - load/e.Capacity
		} else {
			e.Ratio = math.Inf(-1)
		}
	}
	return e
}

// idleLevel is the highest level at which a lone probe met no other
// prefill: a burst of one (split), which a cell's first position is.
const idleLevel = 1.5

// slower is how many times the quickest such probe's TTFT (per level,
// where lone probes stand at their levels) a probe may take and still
// stand on the burst curve: one slower waited for something its level
// does not count (split).
const slower = 1.5

// split sorts a window's points by the curve they feed, leaving out those
// in a burst's aftermath: lone probes the steady one; bursts and the lone
// probes that met no other prefill, bursts of one, the burst one. A burst
// of one is tagged with its prefill level, as a burst is, whatever else was
// decoding; where that level is not known, a lone probe counts as one when
// it ran at up to 1.5 requests in flight. Nor is one that took more than
// 1.5 times the quickest such probe's TTFT: it waited for something its
// level does not count, as a probe does for KV-cache space when the cache
// is full (report 000's simulator at 64K under eleven users: 15.9 s at
// level 1.24, where one alone takes 3.0), and as one request alone it had
// put report 000's document use case at 1.4.
func split(points []Point) (lone, together []Point) {
	levelOf := func(p Point) float64 {
		if p.Level >= 1 {
			return p.Level
		}
		return p.Load
	}
	quickest := math.Inf(1)
	for _, p := range points {
		if !p.Aftermath && p.Burst == 0 && levelOf(p) <= idleLevel {
			quickest = math.Min(quickest, p.TTFT)
		}
	}
	for _, p := range points {
		if p.Aftermath {
			continue
		}
		if p.Burst > 0 {
			together = append(together, p)
			continue
		}
		lone = append(lone, p)
		if level := levelOf(p); level <= idleLevel && p.TTFT <= slower*quickest {
			p.Load, p.Burst = level, 1
			together = append(together, p)
		}
	}
	if len(together) > 0 {
		return lone, together
	}
	// No burst and no probe at an idle moment: a lone probe that met other
	// prefills stands, at its level, for the last of that many requests
	// sent together, whose TTFT is the longest of them. A bound on the
	// early side still, so that a 96K use case whose one probe in the hour
	// met production's prefill has an estimate (report 002: 16.6 s at level
	// 2, where the report's cell of 2 has a mean of 12). As above, one
	// that took more than 1.5 times the quickest such probe's TTFT per
	// level waited for something its level does not count: report 000's
	// document use case, whose probes under eleven 64K users took 17.0 s
	// at level 1.66 and 22.0 s at 3.05 beside 3.64 s at 1.54, had
	// stood at 1.9 and 2.2 (the report: 5).
	quickest = math.Inf(1)
	for _, p := range lone {
		if p.Level >= 1 {
			quickest = math.Min(quickest, p.TTFT/p.Level)
		}
	}
	for _, p := range lone {
		if p.Level >= 1 && p.TTFT/p.Level <= slower*quickest {
			p.Load, p.Burst = p.Level, 1
			together = append(together, p)
		}
	}
	return lone, together
}

// burstCurve fits one SLO's burst curve, each part at the load it answers
// to: TTFT at the level, decode speed and ITL in the batch (inFlight), and
// E2E, a TTFT then a decode, as the sum of the two. short says why the
// points cannot carry it, "" when they can.
//
// Decode speed and ITL need no spread of loads: from one alone, the curve
// holds to Reach times it (lowest), and the engine's readings add the
// loads production made. TTFT needs the levels of requests sent together
// to span MinBurstSpread; from one level only, its part past the overhead
// is taken as proportional to the level past it (Curve.extended). That is
// a bound: n prompts sent together need n prefills of compute, so their
// mean TTFT is at most the overhead plus n times one prompt's prefill, and
// the capacity it gives lies at or below the burst curve's.
// It lets a 96K use case, whose lone probe is all the budget buys in the
// first minutes, have an estimate before its first burst, which then aims
// at that bound (Burst) and replaces it.
func burstCurve(name string, together, eng []Point, stat string, overhead float64) (Curve, string) {
	value, increasing := metric(name)
	why := noBurst(together)
	ttft := cellTTFT(together, stat)
	switch name {
	case "decode_tokens_per_second", "itl_seconds":
		return fit(append(inFlight(settled(together)), eng...), value, stat, increasing), why
	case "e2e_seconds":
		// The decode part reaches as far as the engine's readings, the
		// TTFT part only to the largest burst: past it, TTFT follows its
		// trend, as TTFT's own curve does (burstReach), and the sum
		// reaches as far as the decode part. Without that, a use case
		// whose bursts were two requests had no E2E curve past two.
		decode := fit(append(inFlight(together), eng...), func(p Point) float64 { return p.E2E - p.TTFT }, stat, true)
		if len(ttft) == 0 || len(decode) == 0 {
			return nil, why
		}
		c := sum(ttft.extended(decode[len(decode)-1].Load, overhead), decode)
		for i := range c {
			if c[i].Load > ttft[len(ttft)-1].Load {
				c[i].N = 0 // the TTFT there is the trend's
			}
		}
		return c, why
	}
	if len(ttft) == 1 {
		return ttft.extended(2*ttft[0].Load, overhead), why
	}
	return ttft, why
}

// highest is the most requests in flight any point saw.
func highest(points []Point) float64 {
	h := 0.0
	for _, p := range points {
		h = math.Max(h, math.Max(p.InFlight, p.Load))
	}
	return h
}

// noBurst says why no burst curve can be fitted: no requests were sent
// together, nor did a lone probe meet no other prefill (split).
func noBurst(together []Point) string {
	if len(together) == 0 {
		return "no requests sent together yet"
	}
	return ""
}

// steadyCurve fits one SLO's steady-state curve on lone probes and, for
// decode speed and ITL, the engine's own readings (eng, from engineDecode).
func steadyCurve(name string, lone, eng []Point, stat string) Curve {
	value, increasing := metric(name)
	if name == "decode_tokens_per_second" || name == "itl_seconds" {
		lone = append(append([]Point(nil), lone...), eng...)
	}
	return fit(lone, value, stat, increasing)
}

// engineReadings separates the engine's decode readings (Point.Engine)
// from the probes.
func engineReadings(points []Point) (probes, eng []Point) {
	for _, p := range points {
		if p.Engine {
			eng = append(eng, p)
		} else {
			probes = append(probes, p)
		}
	}
	return probes, eng
}

// engineDecode turns the engine's decode readings into points of one SLO's
// decode part, as the use case's probes would have measured them: at each
// reading's batch, the engine's time between tokens over all its requests
// times the median ratio (geometric) of the probes' own decode time (per
// token for decode speed and ITL, E2E after the first token for E2E) to
// the engine's at the probes' requests in flight. The ratio carries what sets the probes
// apart from production's mix: their context's KV reads, and for E2E their
// token count. The readings carry how decode slows with the batch over every
// load production made, which probes alone reach only with bursts. Nil for
// TTFT, which they do not describe, or when no probe ran at a batch the
// readings cover.
func engineDecode(name string, eng, probes []Point) []Point {
	var per func(Point) float64
	switch name {
	case "decode_tokens_per_second":
		per = func(p Point) float64 { return 1 / p.Decode }
	case "itl_seconds":
		per = func(p Point) float64 { return p.ITL }
	case "e2e_seconds":
		per = func(p Point) float64 { return p.E2E - p.TTFT }
	default:
		return nil
	}
	if len(eng) == 0 {
		return nil
	}
	c := fit(eng, func(p Point) float64 { return p.ITL }, "mean", true)
	if len(c) == 0 {
		return nil
	}
	var ratios []float64
	for _, p := range probes {
		if !(p.InFlight >= c[0].Load-0.5 && p.InFlight <= c[len(c)-1].Load+0.5) {
			continue // beyond the readings (or unknown): no ratio to them
		}
		if x, at := per(p), c.at(p.InFlight); x > 0 && !math.IsInf(x, 1) && at > 0 {
			ratios = append(ratios, math.Log(x/at))
		}
	}
	if len(ratios) == 0 {
		return nil
	}
	// Ratios are factors: their median is taken in log space, where the
	// middle of two is their geometric mean. A probe that queued decodes
	// its few tokens while the prompts queued behind it prefill, many
	// times slower than the engine's mean over the same batch; as one of
	// two ratios, its arithmetic middle scaled every reading by that much
	// (TestDecodeRatioIsGeometric), and decode, which bounds no report's
	// capacity, bounded report 000's document use case (lowest run 3.4 in
	// the virtual table, 3.9 with this).
	r := math.Exp(Statistic(ratios, "p50"))
	out := make([]Point, len(eng))
	for i, p := range eng {
		x := r * p.ITL
		out[i] = Point{Time: p.Time, Load: p.Load, InFlight: p.InFlight, TTFT: 0, E2E: x, ITL: x, Decode: 1 / x, Engine: true}
	}
	return out
}

// placed is the lowest steady-state capacity of the SLOs, where a crossing
// that production's loads left in a gap wider than Reach (a guess, see
// between) yields to the SLO's burst crossing when that lies inside the
// gap: requests queued together are the harsher test of the same server,
// so the steady crossing lies at or above it, and below the gap's failing
// end. This takes production's requests to be no heavier than the probes.
func placed(slos []SLO) float64 {
	c := math.Inf(1)
	for _, s := range slos {
		v := s.Capacity
		if upper, ok := s.Curve.wideGap(v); ok && s.BurstCapacity < upper {
			v = math.Max(v, s.BurstCapacity)
		}
		c = math.Min(c, v)
	}
	return c
}

// settled keeps, of each burst, the probe that got its first token last: the
// only one that decoded with every other request of the burst admitted, as a
// report's 1024-token requests mostly do. The others decoded their few
// tokens between the later ones' prefill chunks, slower than any report
// measured at that concurrency. A burst's probes share its Time and level.
// A bench cell's requests (Cell > 0) ran in a closed loop that kept its
// concurrency: every one of them is kept.
func settled(together []Point) []Point {
	last := map[burst]int{}
	var out []Point
	for i, p := range together {
		if p.Burst < 2 || p.Cell > 0 {
			out = append(out, p)
			continue
		}
		k := burstOf(p)
		if j, ok := last[k]; !ok || p.TTFT > together[j].TTFT {
			last[k] = i
		}
	}
	idx := slices.Sorted(maps.Values(last)) // map order would reorder the sums
	for _, i := range idx {
		out = append(out, together[i])
	}
	return out
}

// inFlight tags the points of bursts with the requests in flight around
// them. A burst's level counts the prefill it competed with, which is what
// its TTFT answers to; its tokens were decoded in a batch with everything
// else running, production included, and so is its decode speed.
func inFlight(points []Point) []Point {
	out := make([]Point, len(points))
	for i, p := range points {
		if p.Burst > 0 {
			p.Load = p.InFlight
		}
		out[i] = p
	}
	return out
}

// steadyEnough says why lone probes cannot carry a fit, "" when they can:
// production's load wanders, so a curve needs samples across a spread.
func steadyEnough(lone []Point) string {
	if len(lone) < MinSamples {
		return fmt.Sprintf("%d samples in the window, %d needed", len(lone), MinSamples)
	}
	if spread := loadSpread(lone); !(spread >= MinSpread) {
		return fmt.Sprintf("observed load spans %.1f requests, %.0f needed", math.Max(0, spread), MinSpread)
	}
	return ""
}

// burstEnough says why requests sent together cannot carry a fit. A burst is
// a benchmark cell: its mean stands for its level as one cell of a report
// does, so levels, not samples, are what it needs.
func burstEnough(together []Point) string {
	if spread := loadSpread(together); !(spread >= MinBurstSpread) {
		return fmt.Sprintf("burst levels span %.1f requests, %.0f needed", math.Max(0, spread), MinBurstSpread)
	}
	return ""
}

func loadSpread(points []Point) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range points {
		if !math.IsNaN(p.Load) {
			lo, hi = math.Min(lo, p.Load), math.Max(hi, p.Load)
		}
	}
	return hi - lo
}

// recent are the points at or after since.
func recent(points []Point, since time.Time) []Point {
	var out []Point
	for _, p := range points {
		if !p.Time.Before(since) {
			out = append(out, p)
		}
	}
	return out
}

func values(points []Point, value func(Point) float64) []float64 {
	vs := make([]float64, len(points))
	for i, p := range points {
		vs[i] = value(p)
	}
	return vs
}

// fit is one metric's monotone load-response.
func fit(points []Point, value func(Point) float64, stat string, increasing bool) Curve {
	return isotonic(bin(points, value, stat), increasing)
}

// solve finds where a fitted load-response reaches the threshold: NaN with
// the reason when the points cannot carry a fit (short is that reason), +Inf
// when the curve stays within the threshold as far as Reach lets it be
// followed, which bounds nothing.
func solve(c Curve, increasing bool, threshold float64, short string) (float64, Curve, string) {
	return solveReach(c, increasing, false, threshold, short, Reach)
}

// burstReach is how far an SLO's burst curve is followed past its highest
// load. TTFT's: as far as its trend goes. Requests sent together queue for
// the same prefill compute, so their mean TTFT grows about linearly with
// their number (the simulator calibrated to report 000: 1.5 s for one 32K
// request, 2.2 for two, 4.3 for four, 8.7 for eight), and a burst of two or
// three at a long context already says where a use case's TTFT breaks, at
// a cost the budget can pay. The search then aims its bursts at that
// crossing (Burst), and a measured bracket replaces the extrapolation.
// Decode speed bends (CUDA graphs, KV reads): Reach.
func burstReach(name string) float64 {
	if name == "ttft_seconds" {
		return math.Inf(1)
	}
	return Reach
}

func solveReach(c Curve, increasing, convex bool, threshold float64, short string, reach float64) (float64, Curve, string) {
	if short == "" && len(c) == 0 {
		short = "no point with a known load"
	}
	if short != "" {
		return math.NaN(), c, short
	}
	if l, ok := c.crossing(threshold, increasing, convex, reach); ok {
		return l, c, ""
	}
	if math.IsInf(reach, 1) {
		return math.Inf(1), c, fmt.Sprintf("threshold not reached on the curve's trend past the highest observed load (%.1f)", c[len(c)-1].Load)
	}
	return math.Inf(1), c, fmt.Sprintf("threshold not reached up to %.0fx the highest observed load (%.1f)", reach, c[len(c)-1].Load)
}

// lowest is the smallest of the SLOs' capacities on one curve: NaN when any
// cannot be fitted or when none reaches its threshold, with the first reason.
// An SLO whose curve stays within its threshold as far as it can be
// followed caps the others' crossings at that reach, beyond which nothing
// is known of it: a burst's decode speed can be measured at more requests
// in flight than its TTFT at prefill levels.
func lowest(slos []SLO, get func(SLO) (float64, Curve, string)) (float64, string) {
	c, reach, why := math.Inf(1), math.Inf(1), ""
	for _, s := range slos {
		v, curve, w := get(s)
		if w != "" && why == "" {
			why = s.Name + ": " + w
		}
		switch {
		case math.IsNaN(v):
			return math.NaN(), why
		case math.IsInf(v, 1):
			reach = math.Min(reach, Reach*curve[len(curve)-1].Load)
		default:
			c = math.Min(c, v)
		}
	}
	if math.IsInf(c, 1) {
		return math.NaN(), why
	}
	return math.Min(c, reach), why
}

// Seeded evaluates with a benchmark's points (a `headroom bench` run of the
// same server: cells of requests sent together) as a prior: while the
// window's probes alone cannot carry an estimate, probes and bench points
// together do. The margins stay those of the probes at the current load.
func Seeded(target string, u UseCase, points, seed []Point, load float64) Estimate {
	e := Evaluate(target, u, points, load)
	if !math.IsNaN(e.Capacity) || len(seed) == 0 {
		return e
	}
	s := Evaluate(target, u, append(append([]Point(nil), seed...), points...), load)
	if math.IsNaN(s.Capacity) {
		return e
	}
	s.Samples, s.Points, s.Seed = e.Samples, e.Points, len(seed)
	s.Why = "capacity from the bench seed and probes; probes alone: " + e.Why
	return s
}
