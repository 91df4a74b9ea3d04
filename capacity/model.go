package capacity

import (
	"fmt"
	"math"
	"strings"
)

// The engine model. A request's latencies are affine in what it shares the
// server with, each term a named physical cost (docs/capacity-model.md):
//
//	TTFT = τ0 + τq·(q−1) + τr·r      q: prompts prefilled with it, itself included
//	                                  (its level); r: requests running beside it
//	ITL  = δ0 + δb·(b−1) + δa·(a−b)  b: the batch it decoded in; a: requests in
//	                                  flight when it arrived, which fix the speed
//	                                  on servers that plan a request on arrival
//	E2E  = ε0 + εq·(q−1) + εr·r
//
// N requests of the use case's shape sent together (the reports' definition)
// have q = b = a = N and r = 0, so their mean TTFT is τ0 + τq·(N−1) and
// their ITL δ0 + δb·(N−1): the capacity is where the first of these reaches
// its threshold. k more on top of what runs now have q = waiting + k,
// r = running, b = a = load + k: the free requests. Every slope is at or
// above zero (more load never makes a server faster), and the fits are
// robust (Huber): a probe that stalled behind something no term counts
// weighs as its distance.

// z is the two-sided 95% normal quantile: the bounds are the loads where
// the fit's 95% confidence band reaches the threshold.
const z = 1.96

// Reach is how far past the most requests the data hold together a fitted
// line is trusted to place a threshold: linear physics holds until
// something the data never met (a KV cache filling, a batch past the
// engine's CUDA graphs) bends it, and twice the measured range is where a
// benchmark's own next cell would go. Past it the capacity is a bound.
const Reach = 2.0

// MinSamples is the fewest observations a law is fitted to: one request
// alone and one level of requests together give its intercept and slope;
// how far they scatter comes from the target's other use cases, or a
// probe's typical scatter, until there are more (fitLinear's scale0).
const MinSamples = 2

// obs is one observation of the model: a lone probe, a burst (its mean), or
// a bench cell (its mean).
type obs struct {
	q, r, a, b      float64 // level, running beside it, in flight at arrival, decode batch
	ttft, e2e, itl  float64
	decodeOK, lone  bool // itl is a decode the batch b describes; a lone probe
	burstSize, cell int
}

// observations turns a window's points into the model's observations. A
// burst's TTFT and E2E are its mean at its level, as a report's cell is; its
// decode is that of the probe that got its first token last, the only one
// that decoded with every request of the burst admitted and none of their
// prefills between its tokens (the others decoded between later prompts'
// prefill chunks, at a tenth of the speed in the simulator of report 002 at
// 64K). A bench cell's requests all decoded amid its concurrency.
func observations(points []Point) []obs {
	var out []obs
	groups := map[[3]int64][]Point{}
	var keys [][3]int64
	for _, p := range points {
		if p.Engine || p.Aftermath || math.IsNaN(p.Load) {
			continue
		}
		if p.Burst <= 1 && p.Cell == 0 {
			q := 1.0
			if p.Level >= 1 {
				q = p.Level
			}
			a := p.Sent
			if !(a >= 1) {
				a = p.Load
			}
			a = math.Max(a, q)
			b := p.InFlight
			if !(b >= 1) {
				b = a
			}
			out = append(out, obs{q: q, r: a - q, a: a, b: b, ttft: p.TTFT, e2e: p.E2E, itl: p.ITL, decodeOK: true, lone: true, burstSize: 1})
			continue
		}
		k := [3]int64{p.Time.UnixNano(), int64(p.Burst), int64(p.Cell)}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], p)
	}
	for _, k := range keys {
		g := groups[k]
		var o obs
		o.burstSize, o.cell = len(g), g[0].Cell
		o.q = g[0].Load
		o.a = g[0].Sent
		if !(o.a >= 1) {
			o.a = o.q
		}
		o.a = math.Max(o.a, o.q)
		o.r = o.a - o.q
		// The median of its probes, not their mean: one that stalled 10x
		// would move a burst of three's mean threefold. Positions in a
		// queue spread evenly, so the two agree otherwise.
		o.ttft = Statistic(values(g, func(p Point) float64 { return p.TTFT }), "p50")
		o.e2e = Statistic(values(g, func(p Point) float64 { return p.E2E }), "p50")
		last := g[0]
		for _, p := range g {
			o.b += p.InFlight / float64(len(g))
			if p.TTFT > last.TTFT {
				last = p
			}
		}
		if o.cell > 0 {
			o.itl, o.b, o.decodeOK = mean(g, func(p Point) float64 { return p.ITL }), o.q, true
		} else {
			o.itl, o.decodeOK = last.ITL, !math.IsNaN(last.ITL)
			if last.InFlight >= 1 {
				o.b = last.InFlight
			}
		}
		out = append(out, o)
	}
	return out
}

func mean(ps []Point, v func(Point) float64) float64 {
	s := 0.0
	for _, p := range ps {
		s += v(p)
	}
	return s / float64(len(ps))
}

// part is one fitted law (TTFT's or ITL's) and how a situation maps onto
// its columns: N requests together, or k more on top of the load now.
type part struct {
	fit      linearFit
	ok       bool
	reach    float64 // the most requests together the data hold
	together func(n float64) []float64
	more     func(k, load, waiting float64) []float64
}

// ttftPart fits TTFT = τ0 + τq·(q−1) + τr·r.
func ttftPart(os []obs, pr Prior) part {
	p := part{
		together: func(n float64) []float64 { return []float64{1, n - 1, 0} },
		more: func(k, load, waiting float64) []float64 {
			return []float64{1, waiting + k - 1, math.Max(load-waiting, 0)}
		},
	}
	var x [][]float64
	var y []float64
	for _, o := range os {
		if o.ttft > 0 && !math.IsInf(o.ttft, 0) {
			x, y = append(x, []float64{1, o.q - 1, o.r}), append(y, o.ttft)
			p.reach = math.Max(p.reach, o.q)
		}
	}
	p.fitTo(x, y, pr.TTFT, pr)
	return p
}

// itlPart fits ITL = δ0 + δb·(b−1) + δa·(a−b).
func itlPart(os []obs, pr Prior) part {
	p := part{
		together: func(n float64) []float64 { return []float64{1, n - 1, 0} },
		more:     func(k, load, _ float64) []float64 { return []float64{1, load + k - 1, 0} },
	}
	var x [][]float64
	var y []float64
	arrived := 0.0
	for _, o := range os {
		if o.decodeOK && o.itl > 0 && !math.IsInf(o.itl, 0) {
			x, y = append(x, []float64{1, o.b - 1, math.Max(o.a-o.b, 0)}), append(y, o.itl)
			p.reach, arrived = math.Max(p.reach, o.b), math.Max(arrived, o.a)
		}
	}
	p.fitTo(x, y, pr.ITL, pr)
	if p.ok && p.fit.used[2] {
		// A server that fixes a request's speed on arrival (δa > 0) was
		// measured as far as the requests its probes arrived into, however
		// few of them shared their decode.
		p.reach = math.Max(p.reach, arrived)
	}
	return p
}

// fitTo fits the part to its data, with the slope the target's other use
// cases imply (r, a ratio of slope to intercept) as a prior: physics
// shares that ratio across prompt lengths (Prior), but only roughly, so it
// is held to within priorSpread of its value and a use case's own bursts
// soon outweigh it.
func (p *part) fitTo(x [][]float64, y []float64, r Ratio, pr Prior) {
	if len(y) == 0 {
		return
	}
	nonneg := []bool{false, true, true}
	scale0 := pr.Scale
	if !(scale0 > 0) {
		scale0 = typicalScale
	}
	own, ok := fitLinear(x, y, nonneg, slopePrior{}, scale0)
	p.fit, p.ok = own, ok && len(y) >= MinSamples
	if !ok || !(r.SE > 0) || !(r.Value > 0) || !(own.beta[0] > 0) {
		return
	}
	m := r.Value * own.beta[0]
	sd := math.Hypot(priorSpread*m, r.SE*own.beta[0])
	p.fit, p.ok = fitLinear(x, y, nonneg, slopePrior{value: m, sd: sd}, scale0)
	p.reach = math.Max(p.reach, pr.Reach)
}

// slope says whether the fit knows how the quantity grows with requests
// sent together (a slope held at zero is known; so is one from a prior).
func (p part) slope() bool { return p.ok && p.fit.varies[1] }

// term is one SLO's quantity as the model states it: a weighted sum of
// parts (E2E is a TTFT and then a decode of so many tokens), against the
// threshold on that quantity (1/decode speed for a decode threshold).
type term struct {
	name   string
	parts  []part
	coefs  []float64
	offset float64 // the statistic's distance from the mean, in residuals
	limit  float64
}

// law states one SLO's quantity from the fitted parts.
func law(s SLO, os []obs, stat string, ttft, itl part) term {
	t := term{name: s.Name, limit: s.Threshold}
	switch s.Name {
	case "ttft_seconds":
		t.parts, t.coefs = []part{ttft}, []float64{1}
	case "e2e_seconds":
		// The tokens after the first, each an ITL: the probes' own count.
		var ds []float64
		for _, o := range os {
			if o.decodeOK && o.itl > 0 && o.e2e > o.ttft {
				ds = append(ds, (o.e2e-o.ttft)/o.itl)
			}
		}
		t.parts, t.coefs = []part{ttft, itl}, []float64{1, Statistic(ds, "p50")}
	default: // itl_seconds, decode_tokens_per_second: both on the ITL
		if s.Name == "decode_tokens_per_second" {
			t.limit = 1 / s.Threshold
		}
		t.parts, t.coefs = []part{itl}, []float64{1}
	}
	if t.ok() && stat != "mean" && stat != "" {
		t.offset = Statistic(t.parts[0].fit.resid, stat)
	}
	return t
}

func (t term) ok() bool {
	for i, p := range t.parts {
		if !p.ok || math.IsNaN(t.coefs[i]) {
			return false
		}
	}
	return len(t.parts) > 0
}

func (t term) slope() bool {
	for _, p := range t.parts {
		if !p.slope() {
			return false
		}
	}
	return t.ok()
}

// reach is the most requests together every part's data hold.
func (t term) reach() float64 {
	r := math.Inf(1)
	for _, p := range t.parts {
		r = math.Min(r, p.reach)
	}
	return r
}

// together is the quantity for n requests of the shape sent together,
// and its standard error.
func (t term) together(n float64) (float64, float64) {
	return t.sum(func(p part) []float64 { return p.together(n) })
}

func (t term) sum(g func(part) []float64) (v, se float64) {
	var v2 float64
	for i, p := range t.parts {
		pv, pse := p.fit.predict(g(p))
		v += t.coefs[i] * pv
		v2 += t.coefs[i] * t.coefs[i] * pse * pse
	}
	return v + t.offset, math.Sqrt(v2)
}

// crossing is the smallest n in [0, maxN] where value(n) + band·se reaches
// the limit: +Inf when it never does.
func (t term) crossing(value func(n float64) (float64, float64), band float64) float64 {
	f := func(n float64) float64 {
		v, se := value(n)
		return v + band*se - t.limit
	}
	if f(0) >= 0 {
		return 0
	}
	lo, hi := 0.0, 1.0
	for f(hi) < 0 {
		lo, hi = hi, 2*hi
		if hi > maxN {
			return math.Inf(1)
		}
	}
	for range 60 {
		mid := (lo + hi) / 2
		if f(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Prior is what a target's other use cases say of one use case's laws
// before its own bursts do: how steeply TTFT and ITL grow per request sent
// together, relative to their value for one request alone. Physics shares
// these ratios across prompt lengths: requests queued together wait for
// one another's prefill, each about as long as its own, so TTFT's slope
// scales with one request's TTFT; decode steps read every sequence's
// weights and KV cache, so ITL's slope scales with one request's ITL.
// Scale is the relative residual scale of the others' fits, Reach the most
// requests together their data hold. The zero Prior knows nothing.
type Prior struct {
	TTFT, ITL Ratio
	Scale     float64
	Reach     float64
}

// Ratio is one relative slope and its standard error; SE 0: unknown.
type Ratio struct{ Value, SE float64 }

// priorSpread is how far a slope taken from the target's other use cases may be
// off for this one, as a share of it: the ratio of TTFT's slope to its
// intercept differs between contexts by attention's share of the prefill
// (reports 000-002: 1K to 96K prompts differ by up to about half), and a
// scripted server's law need not share it at all, so the prior counts
// for little beside a use case's own bursts.
const priorSpread = 0.5

// Ratios is what one use case's own data say of its laws' relative slopes,
// for its target's other use cases' priors (Pool): TTFT's and ITL's, where
// its own data slope them, with the scale of its fits and its reach.
func Ratios(points []Point) Prior {
	os := observations(points)
	var out Prior
	for _, p := range []struct {
		part part
		to   *Ratio
	}{{ttftPart(os, Prior{}), &out.TTFT}, {itlPart(os, Prior{}), &out.ITL}} {
		f := p.part.fit
		if !p.part.ok || !f.used[1] || !(f.beta[0] > 0) || math.IsInf(f.cov[1][1], 0) {
			continue
		}
		*p.to = Ratio{Value: f.beta[1] / f.beta[0], SE: math.Sqrt(f.cov[1][1]) / f.beta[0]}
		out.Scale = math.Max(out.Scale, f.scale)
		out.Reach = math.Max(out.Reach, p.part.reach)
	}
	return out
}

// Pool is the prior for one use case from the others' Ratios: each ratio
// their weighted mean, each weighing as the inverse of its variance plus
// priorSpread's (the ratios differ between prompt lengths by more than
// their standard errors: a random-effects mean, so that no one use case's
// tight fit speaks for all); the scale their median, the reach their most.
func Pool(others []Prior) Prior {
	var out Prior
	pool := func(get func(Prior) Ratio) Ratio {
		sw, sv := 0.0, 0.0
		for _, o := range others {
			if r := get(o); r.SE > 0 && r.Value > 0 {
				w := 1 / (r.SE*r.SE + priorSpread*priorSpread*r.Value*r.Value)
				sw, sv = sw+w, sv+w*r.Value
			}
		}
		if sw == 0 {
			return Ratio{}
		}
		return Ratio{Value: sv / sw, SE: 1 / math.Sqrt(sw)}
	}
	out.TTFT = pool(func(p Prior) Ratio { return p.TTFT })
	out.ITL = pool(func(p Prior) Ratio { return p.ITL })
	var scales []float64
	for _, o := range others {
		if o.Scale > 0 && !math.IsInf(o.Scale, 0) {
			scales = append(scales, o.Scale)
		}
		if o.TTFT.SE > 0 || o.ITL.SE > 0 {
			out.Reach = math.Max(out.Reach, o.Reach)
		}
	}
	if len(scales) > 0 {
		out.Scale = Statistic(scales, "p50")
	}
	return out
}

// maxN is where a crossing search gives up: no server holds a million
// requests together.
const maxN = 1 << 20

// sloFit is what one SLO's law says of the capacity.
type sloFit struct {
	est, lo, hi float64
	placed      bool
	why         string
}

// place solves one SLO: the estimate where the fitted law reaches the
// threshold, the bounds where its confidence band does, and whether the
// data place it (within Reach of what they hold).
func (t term) place() sloFit {
	short := sloShort(t.name)
	if !t.slope() {
		return sloFit{est: math.NaN(), lo: math.NaN(), hi: math.Inf(1),
			why: short + ": no requests sent together at two levels yet"}
	}
	f := sloFit{est: t.crossing(t.together, 0), lo: t.crossing(t.together, z), hi: t.crossing(t.together, -z)}
	reach := t.reach()
	f.placed = f.est <= Reach*reach
	if !f.placed {
		f.lo = math.Min(f.lo, Reach*reach)
		f.why = fmt.Sprintf("%s threshold not reached; requests together up to %.0f", short, reach)
	}
	return f
}

func sloShort(name string) string {
	switch name {
	case "ttft_seconds":
		return "TTFT"
	case "e2e_seconds":
		return "E2E"
	case "itl_seconds":
		return "ITL"
	}
	return "decode"
}

// evaluate fills e's capacity, bounds, margin, free and ratio from the
// model fitted to os.
func (e *Estimate) evaluate(os []obs, stat string, load, waiting float64, pr Prior) {
	ttft, itl := ttftPart(os, pr), itlPart(os, pr)
	terms := make([]term, len(e.SLOs))
	fits := make([]sloFit, len(e.SLOs))
	binding := -1
	var whys []string
	e.Lower, e.Upper = math.Inf(1), math.Inf(1)
	for i := range e.SLOs {
		s := &e.SLOs[i]
		terms[i] = law(*s, os, stat, ttft, itl)
		fits[i] = terms[i].place()
		s.Capacity, s.Lower, s.Upper, s.Why = fits[i].est, fits[i].lo, fits[i].hi, fits[i].why
		if terms[i].ok() {
			r := terms[i].reach()
			s.Curve = terms[i].curve(s.Name, math.Max(2*r, math.Min(fits[i].est*1.2, 4*r)))
		}
		if fits[i].why != "" {
			whys = append(whys, fits[i].why)
		}
		if math.IsNaN(fits[i].est) {
			e.Lower = math.NaN()
			continue
		}
		e.Lower, e.Upper = math.Min(e.Lower, fits[i].lo), math.Min(e.Upper, fits[i].hi)
		if binding < 0 || fits[i].est < fits[binding].est {
			binding = i
		}
	}
	e.Why = strings.Join(whys, "; ")
	switch {
	case binding < 0 || math.IsNaN(e.Lower):
		// A law the data cannot slope yet: all that is known is whether
		// one request alone meets every threshold.
		e.Bound, e.Lower, e.Upper = "lower", e.alone(), math.Inf(1)
		if math.IsNaN(e.Lower) {
			e.Bound = ""
		}
		return
	case !fits[binding].placed:
		e.Bound = "lower"
		e.Why = fmt.Sprintf("at least %.1f: %s", e.Lower, e.Why)
		return
	}
	e.Capacity = fits[binding].est
	e.Why = ""
	if math.IsNaN(load) {
		return
	}
	// The margin, the free requests and the ratio are one reading of the
	// same laws at the load now, so that they never disagree: the margin is
	// what one more request would meet, free how many more fit.
	w := math.Max(waiting, 0)
	if math.IsNaN(waiting) {
		w = 0
	}
	free := math.Inf(1)
	e.Margin = math.Inf(1)
	for i := range e.SLOs {
		s, t := &e.SLOs[i], terms[i]
		more := func(k float64) (float64, float64) {
			return t.sum(func(p part) []float64 { return p.more(k, load, w) })
		}
		v, _ := more(1)
		s.Margin = (t.limit - v) / t.limit
		if s.Name == "decode_tokens_per_second" {
			s.Margin = (1/v - s.Threshold) / s.Threshold
		}
		e.Margin = math.Min(e.Margin, s.Margin)
		free = math.Min(free, t.crossing(more, 0))
	}
	if e.Margin < 0 || free < 1 {
		free = 0
	}
	e.Free = free
	e.Ratio = 0
	if e.Capacity > 0 {
		e.Ratio = math.Min(free/e.Capacity, 1)
	}
}

// alone is the capacity's lower bound before any law can be sloped: 1 when
// the lone probes' statistic meets every threshold, 0 when one does not;
// NaN without probes.
func (e *Estimate) alone() float64 {
	out := 1.0
	for _, s := range e.SLOs {
		switch {
		case math.IsNaN(s.Value):
			return math.NaN()
		case s.Margin < 0:
			out = 0
		}
	}
	return out
}

// curve samples a fitted law for N together, for the status page's chart.
func (t term) curve(name string, upTo float64) Curve {
	upTo = math.Min(math.Max(upTo, 2), maxN)
	var c Curve
	for i := range 9 {
		n := 1 + (upTo-1)*float64(i)/8
		v, _ := t.together(n)
		if name == "decode_tokens_per_second" {
			v = 1 / v
		}
		c = append(c, Knot{Load: n, Value: v})
	}
	return c
}
