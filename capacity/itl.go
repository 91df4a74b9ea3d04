package capacity

import (
	"math"
	"slices"
)

// fitter fits a law's coefficients to observations (fitLinear's
// arguments and result).
type fitter func(x [][]float64, y []float64, groups []int, nonneg []bool, prior slopePrior, scale0 float64) (linearFit, bool)

// fitITL fits the ITL law, which a step's prefill makes nonlinear: over
// a share s of its decode's time the request gets a token every D+δp, over
// the rest every D, so its mean interval is the harmonic 1/(s/(D+δp) +
// (1−s)/D), not D + δp·s. A short probe that decoded amid a burst's
// prefills got few of its tokens then; a mean linear in s reads it as a
// small δp, and the bend then takes the slow steps for the batch's. The
// law is homogeneous of degree one in its coefficients, so its value is
// its Jacobian times them: Gauss-Newton is fitLinear on the Jacobian's
// columns, until the coefficients settle, from two starts (below).
//
// most bounds δp by what the probes measured: a step's prefill work is at
// most one prompt's whole prefill (the TTFT law's intercept), whether the
// engine prefills a chunk of it in each step or all of it in one, and a
// step that prefills is no longer than the longest gap between two tokens
// a probe saw while prompts waited beside its decode (s above zero: it saw
// such steps; an engine that slows every step alike while prompts wait
// makes each gap D+δp). A probe that decoded beside no waiting prompt saw
// plain steps only, and its gap bounds none that prefills. Without a
// bound, intervals that grow with s faster than the harmonic law can
// follow (at most D/(1−s), as δp grows without end) send δp to infinity;
// and under production, whose prefills s does not count, δp takes their
// time as the burst's up to its bound.
func fitITL(most float64) fitter {
	return func(x [][]float64, y []float64, groups []int, nonneg []bool, prior slopePrior, scale0 float64) (linearFit, bool) {
		f, ok := fitLinear(x, y, groups, nonneg, prior, scale0)
		if !ok || !f.used[prefilling] || !(f.beta[prefilling] > 0) {
			return f, ok
		}
		settle := func(f linearFit) (linearFit, bool) {
			started := false
			for range gaussNewton {
				if !f.used[prefilling] || !(f.beta[prefilling] > 0) {
					break
				}
				next, nok := stepITL(x, y, groups, nonneg, prior, scale0, f.beta, math.Inf(1))
				if nok && next.beta[prefilling] > most {
					next, nok = stepITL(x, y, groups, nonneg, prior, scale0, f.beta, most)
				}
				if !nok {
					break
				}
				moved := 0.0
				for c := range f.beta {
					moved = math.Max(moved, math.Abs(next.beta[c]-f.beta[c])/math.Max(math.Abs(f.beta[c]), 1e-6))
				}
				f, started = next, true
				if moved < 1e-4 {
					break
				}
			}
			return f, started
		}
		// Gauss-Newton finds the least squares nearest its start, and the
		// harmonic law has more than one: the straight line reads the chunk
		// steps' time as a small δp and the rest as a steep batch slope,
		// and from there the law can settle with a step alone at or below
		// zero. Sim0 of the pool test (report 000's engine, one whole
		// prompt's prefill a step, 1.2 s) fitted δ0 −57 ms, δb 11.7 ms and
		// δp 46 ms from bursts of 9 to 28 under six users, against the
		// engine's 6.7 ms, 0.8 ms and a step at its bound, and read its
		// chatbot at 11.6 [4.4, 24.1] against 18; sim1's, from a line
		// inside the domain, settled at δ0 −1.1 ms with relative squared
		// residuals of 14.6 where the other start's fit left 0.44. The law
		// also starts from the steps that carried no chunk, which are the
		// decode step D itself, with δp at its bound (the slow steps the
		// chunks' before the batch's), and keeps the fit that leaves the
		// smaller residuals. Only where the line's start did not settle
		// on a step alone above zero, as every engine's is: taken on every
		// fit, the second start added a third to a refit of 1,000 targets
		// (BenchmarkEstimates/probed: 7.3 -> 9.5 million allocations).
		best, started := settle(f)
		if started && best.beta[0] > 0 {
			return best, true
		}
		if !started {
			best = f
		}
		if px, py, pg := plain(x, y, groups); len(py) > 0 && most > 0 && !math.IsInf(most, 1) {
			if from, ok := fitLinear(px, py, pg, nonneg, prior, scale0); ok {
				from.beta[prefilling], from.used[prefilling] = most, true
				if g, started := settle(from); started && harmonicLoss(x, y, g.beta) < harmonicLoss(x, y, best.beta) {
					best = g
				}
			}
		}
		return best, true
	}
}

// harmonicLoss is the ITL law's relative squared residuals at the
// coefficients beta, what its fit minimizes (fitLinear weighs each
// observation by 1/y²); infinite where a step D is at or below zero,
// outside the law's domain.
func harmonicLoss(x [][]float64, y, beta []float64) float64 {
	loss := 0.0
	for i, r := range x {
		d, p, s := decodeStep(beta, r), beta[prefilling], r[prefilling]
		if !(d > 0) {
			return math.Inf(1)
		}
		e := d*(d+p)/(d+(1-s)*p)/y[i] - 1
		loss += e * e
	}
	return loss
}

// stepITL is one Gauss-Newton step of fitITL from beta, δp held at held
// where that is finite. δp's column in the Jacobian is s shrunk by
// (D/(D+(1−s)·δp))², a tenth of it where a step with a chunk is many
// decode steps long: fitLinear, which tells a column the data vary along
// by its spread in the data's own units (spread), would drop it, so it is
// fitted in s's units and scaled back. Held, its part of each interval is
// taken from the interval and the rest fitted.
func stepITL(x [][]float64, y []float64, groups []int, nonneg []bool, prior slopePrior, scale0 float64, beta []float64, held float64) (linearFit, bool) {
	at := slices.Clone(beta)
	fixed := !math.IsInf(held, 1)
	if fixed {
		at[prefilling] = held
	}
	jac := make([][]float64, len(x))
	for i, r := range x {
		dD, dP, positive := stepShare(at, r)
		if !positive {
			return linearFit{}, false
		}
		jac[i] = make([]float64, len(r))
		for c, v := range r {
			jac[i][c] = dD * v
		}
		jac[i][prefilling] = dP
	}
	k := 1.0
	if fixed {
		y = slices.Clone(y)
		for i, r := range jac {
			y[i] -= r[prefilling] * held
			r[prefilling] = 0
		}
	} else if ratio := rangeOf(x, prefilling) / rangeOf(jac, prefilling); ratio > 0 && !math.IsInf(ratio, 0) {
		k = ratio
		for _, r := range jac {
			r[prefilling] *= k
		}
	}
	next, ok := fitLinear(jac, y, groups, nonneg, prior, scale0)
	if !ok {
		return next, false
	}
	if fixed {
		next.beta[prefilling], next.used[prefilling], next.varies[prefilling] = held, true, true
	} else {
		next.beta[prefilling] *= k
		for c := range next.cov {
			next.cov[c][prefilling] *= k
			next.cov[prefilling][c] *= k
		}
	}
	for _, b := range next.beta {
		if math.IsNaN(b) || math.IsInf(b, 0) {
			return next, false
		}
	}
	return next, true
}

// gaussNewton is the most rounds fitITL takes; from the straight line's
// fit it settles in a few.
const gaussNewton = 20

// stepShare is the derivatives of the ITL law's mean interval, D·(D+δp)/
// (D+(1−s)·δp) (the harmonic mean of D and D+δp weighted by time: the
// twin decodes at the same two paces, event by event), at one observation's columns
// r with the coefficients beta: in its decode step D and in δp; positive
// false where D is not above zero.
func stepShare(beta, r []float64) (dD, dP float64, positive bool) {
	d := decodeStep(beta, r)
	p, s := beta[prefilling], r[prefilling]
	if !(d > 0) {
		return 0, 0, false
	}
	den := d + (1-s)*p
	return ((2*d+p)*den - d*(d+p)) / (den * den), s * d * d / (den * den), true
}

// itlRow is the ITL law's columns for a request that decoded in a batch b,
// arrived into a requests, decoded a share s of its time while prompts
// waited for their first token, beside k thousand KV tokens beyond its
// count's worth; bend is what stands for (b−1)² (twin.bend), and the
// levelling's column is of shape r (levelColumn).
func itlRow(b, a, s, bend, k, r float64) [itlCols]float64 {
	return [itlCols]float64{1, b - 1, a - b, s, bend, k, levelColumn(b, r)}
}

// levelColumn is the ITL law's levelling column at a batch of b: for a
// batch of b tokens each routed to k of E experts, the experts read beyond
// one token's, E·((1 − r) − (1 − r)^b) with r = k/E, in units of
// E·r·(1 − r): (1 − (1 − r)^(b−1))/r. It rises by one a sequence over the
// first few and levels at 1/r once every expert is read. r = 0 is ln b,
// the shape where the data cannot place the saturation (a power of the
// batch as the power goes to zero: the calibrated simulators' steps).
func levelColumn(b, r float64) float64 {
	b = math.Max(b, 1)
	if r <= 0 {
		return math.Log(b)
	}
	return (1 - math.Pow(1-r, b-1)) / r
}

// levelSlope is levelColumn's derivative in b: what one more sequence
// adds to the column there.
func levelSlope(b, r float64) float64 {
	b = math.Max(b, 1)
	if r <= 0 {
		return 1 / b
	}
	return -math.Log1p(-r) * math.Pow(1-r, b-1) / r
}

// saturations bound where a levelling's shape is looked for: r = k/E
// from 1/2 (two experts, one a token) to 1/256 (past every reference
// model's ratio: DeepSeek-V3's 8 of 256 is 1/32), searched on ln r.
const (
	saturationMost  = 0.5
	saturationLeast = 1.0 / 256
)

// goldenSteps is how many golden-section steps saturation takes: each
// narrows ln r's range 0.618 times, 15 of them to a thousandth of it.
const goldenSteps = 15

// saturation is the shape r of a levelling (levelColumn) the data place:
// the one whose fit (shaped) leaves the least relative squared residuals,
// searched on ln r by golden section, where it fits better than ln b by
// more than Student's t squared times its residual variance (an F test of
// the one parameter more, its degrees of freedom the groups less the
// coefficients, as concave counts them: a burst's probes are one
// measurement); 0 (ln b) otherwise. A step that does not level within
// the batches measured cannot tell one saturation from another, nor from
// ln b, and keeps ln b.
func saturation(y []float64, groups []int, shaped func(r float64) ([][]float64, part)) float64 {
	loss := func(r float64) (float64, linearFit) {
		xc, q := shaped(r)
		if !q.ok || !(q.fit.beta[0] > 0) || !(q.fit.beta[experts] > 0) {
			return math.Inf(1), q.fit
		}
		return harmonicLoss(xc, y, q.fit.beta), q.fit
	}
	lo, hi := math.Log(saturationLeast), math.Log(saturationMost)
	const phi = 0.6180339887498949
	a, b := hi-phi*(hi-lo), lo+phi*(hi-lo)
	la, _ := loss(math.Exp(a))
	lb, _ := loss(math.Exp(b))
	for range goldenSteps {
		if la <= lb {
			hi, b, lb = b, a, la
			a = hi - phi*(hi-lo)
			la, _ = loss(math.Exp(a))
		} else {
			lo, a, la = a, b, lb
			b = lo + phi*(hi-lo)
			lb, _ = loss(math.Exp(b))
		}
	}
	best, r := la, math.Exp(a)
	if lb < la {
		best, r = lb, math.Exp(b)
	}
	base, _ := loss(0)
	_, f := loss(r)
	df := float64(distinct(groups) - cols(f.used) - 1)
	if math.IsInf(best, 1) || df < 1 {
		return 0
	}
	f.df = df
	if t := f.quantile(); base-best > t*t*best/df {
		return r
	}
	return 0
}

// decodeStep is the ITL law's decode step D at one row: every coefficient
// but δp times its column.
func decodeStep(beta, r []float64) float64 {
	d := 0.0
	for c, b := range beta {
		if c != prefilling {
			d += b * r[c]
		}
	}
	return d
}

// prefillShares gives each of the engine's own readings the share of its
// span the engine spent in steps that prefilled, at least: the prompts it
// took in, in the use case's prompts, each taking the engine as long as a
// prompt ahead of one of the use case's does (the TTFT law's τq, or τw
// where prompts prefill side by side), its τ0 until the law knows how
// TTFT grows with prompts together. Where a prompt ahead costs nothing (a
// server that prefills side by side at each prompt's own pace, the
// suite's KV-cliff law) the gauge's share stands: taken from τ0 there, a
// share of steps no decode waits in moved that family's fits. The
// waiting gauge the readings carry misses the prompt being prefilled (the
// engine holds it among the running): on report 002's simulator, which
// prefills one prompt a step, a closed loop of seven of its chatbot's 32K
// prompts spent 38% of its time in steps that prefilled, where the
// readings under the reports' table's production (15 to 21 running)
// caught a prompt waiting at 13-42% of them; the ITL law took the longer
// mean interval for a batch's slope, δb 1.84 ms against the engine's
// 0.85, with δp 22 ms against its 1.2 s steps. Production's shorter
// prompts come scaled by their length (observations). os is not changed:
// a copy is, where any reading says.
func prefillShares(os []obs, ttft part, input float64) []obs {
	if !ttft.ok || !(input > 0) {
		return os
	}
	work := ttft.prefill()
	if ttft.slope() {
		work = math.Max(ttft.fit.beta[1], ttft.fit.beta[queued])
	}
	if !(work > 0) {
		return os
	}
	var out []obs
	for i, o := range os {
		if !(o.prompts > 0) {
			continue
		}
		if out == nil {
			out = slices.Clone(os)
		}
		out[i].prefilling = math.Max(o.prefilling, math.Min(1, o.prompts/input*work))
	}
	if out == nil {
		return os
	}
	return out
}

// itlPart fits the ITL law, its bend δ2 only where the data show it
// (curved).
func itlPart(os []obs, pr Prior, prefill float64) part {
	var p part
	x, y, groups, prod := make([][]float64, 0, len(os)), make([]float64, 0, len(os)), make([]int, 0, len(os)), make([]float64, 0, len(os))
	cells := make([]float64, 0, itlCols*len(os)) // the rows' one backing array
	arrived := 0.0
	p.least = math.Inf(1)
	for _, o := range os {
		if o.decodeOK && o.itl > 0 && !math.IsInf(o.itl, 0) {
			r := itlRow(o.b, o.a, o.prefilling, (o.b-1)*(o.b-1), o.kv, 0)
			cells = append(cells, r[:]...)
			row := cells[len(cells)-itlCols : len(cells) : len(cells)]
			x, y, groups = append(x, row), append(y, o.itl), append(groups, o.group)
			prod = append(prod, o.prod)
			p.reach, arrived = math.Max(p.reach, o.b), math.Max(arrived, o.a)
			p.least = math.Min(p.least, o.b)
		}
	}
	measured := p.reach
	// δp is at most a lone prompt's whole prefill, and no longer than the
	// longest step a probe decoded in while prompts waited (fitITL).
	most, gap := math.Inf(1), 0.0
	if prefill > 0 {
		most = prefill
	}
	for _, o := range os {
		if o.prefilling > 0 && o.gap > gap && !math.IsInf(o.gap, 0) {
			gap = o.gap
		}
	}
	if gap > 0 {
		most = math.Min(most, gap)
	}
	// The other use cases lend their bend where their batches reached
	// further than this one's: the engine turns compute-bound at a batch,
	// whatever the prompt (Bend).
	var lent []priorRow
	if b := pr.Bend; b.Value > 0 && b.SE > 0 && b.Batches > measured {
		lent = []priorRow{{col: curved, value: b.Value, sd: b.SE}}
	}
	// What a thousand KV tokens of production's add to a step is what a
	// thousand more a sequence holds add to its own (perSequence's line
	// across the use cases' lengths): one cost per KV token read. Where
	// production's KV and its count move together (a steady mix), the data
	// alone cannot split a step's growth between them, and the twin, with
	// no production, needs the split.
	// priors are the rows every refit keeps: this, and a lent δp below.
	var priors []priorRow
	if r := pr.ITL; r.PerKVSE > 0 && spread(x, itlKV) {
		priors = []priorRow{{col: itlKV, value: r.PerKV, sd: r.PerKVSE}}
	}
	if st := pr.Step; !spread(x, prefilling) && st.Value > 0 && st.Value < prefill {
		// No probe of its own decoded beside waiting prompts (lone probes,
		// or bursts beside production, whose prompts s does not count): its
		// data cannot say δp, and a use case whose prompt fills a chunk no
		// less lends it (Prior.Step). Only a step shorter than this one's
		// whole prefill alone: a chunk its prompt fills. A longer one says
		// the chunk holds its whole prompt, and what that step takes beside
		// its overhead no probe measured; with no prefill known (a TTFT law
		// not fitted, or its intercept at or below zero), nothing says.
		priors = append(priors, priorRow{col: prefilling, value: math.Min(st.Value, most), sd: st.SE})
	}
	// A step that grows more slowly than its batch: a mixture of experts
	// (every reference report's model is one) reads, for a batch of b
	// tokens each routed to k of its E experts, the weights of the
	// E·(1 − (1 − k/E)^b) experts they reached, steeply over the first
	// sequences and level once every expert is read; the calibrated
	// simulators' steps grow as the batch to a power of 0.06 to 0.44. The
	// column is the experts read (levelColumn), its share k/E the one the
	// data place (saturation), or ln b where they place none (the power's
	// limit as it goes to zero). ln b through a step that saturates goes on
	// rising where every expert is read, and bends its early sequences
	// more than the experts do, so that its fit puts δ0 below zero and the
	// law keeps its line (moe-decode/4101's short chatbot, levelling
	// plainly over bursts to 64: 104.3 against 167.7). The batches
	// measured bend one way or the other, so the law takes a levelling or
	// the bend, not both (the two would fit a line's noise between them):
	// a levelling where the plain steps show it (concave) and the whole
	// law's fit keeps it beyond Student's t; a line's noise would
	// otherwise bend its extrapolation down, towards a capacity too high.
	levelled := false
	// Where this use case's own steps cannot show it (too few bursts to
	// tell a curve from a line; steps that carry prompts' chunks), the
	// others whose batches reached further lend theirs, as they lend the
	// bend: moe-decode/3's chatbot, its bursts of 4, 8 and 16 levelling
	// off plainly but with one degree of freedom left beside the curve,
	// read 27.2 against 47.6 with a line. The law takes the lent δe, not
	// a lent bend: where the others disagree, neither is taken.
	var levels []priorRow
	if e := pr.Levels; e.Value > 0 && e.SE > 0 && e.Batches > measured && len(lent) == 0 {
		levels = []priorRow{{col: experts, value: e.Value, sd: e.SE}}
	}
	if own := concave(x, y, groups, prod, pr, most, priors); (own || levels != nil) && spread(x, experts) {
		if own {
			levels = nil
		}
		// The law fitted with each shape, kept: the search ends on a shape
		// it fitted, and ln b's fit is the lower bound's too (wide).
		type shapedFit struct {
			xc [][]float64
			q  part
		}
		fits := map[float64]shapedFit{}
		shaped := func(r float64) ([][]float64, part) {
			if f, ok := fits[r]; ok {
				return f.xc, f.q
			}
			xc := make([][]float64, len(x))
			cells := make([]float64, itlCols*len(x))
			for i, row := range x {
				xc[i] = cells[i*itlCols : (i+1)*itlCols : (i+1)*itlCols]
				copy(xc[i], row)
				xc[i][curved] = 0
				xc[i][experts] = levelColumn(row[1]+1, r)
			}
			q := p
			q.saturate = r
			q.fitTo(xc, y, groups, pr.ITL, pr, fitITL(most), slices.Concat(levels, priors)...)
			fits[r] = shapedFit{xc, q}
			return xc, q
		}
		// Its own levelling takes the shape its data place (saturation);
		// where they place none, and a lent one the lender's, measured
		// further. k/E is the model's, the share of its experts a token is
		// routed to, whatever the prompt: moe-decode/3's idle document, its
		// bursts too few to place it (three coefficients and a shape
		// through four groups), fitted ln b where its three other use
		// cases each placed 1/8.
		r := 0.0
		if own {
			r = saturation(y, groups, shaped)
		}
		if lent := pr.Levels; r == 0 && lent.Batches > measured {
			r = lent.Shape
		}
		xc, q := shaped(r)
		// Shown by the plain steps, but not beside the rest of the law's
		// terms (δa, δp), the law cannot tell it from them and keeps its
		// line (report 003's coding assistant, whose steps grow linearly
		// once a batch holds one sequence, read 26.4 against 17.6 with
		// it); nor where it takes a step alone (δ0) to zero or below,
		// which no engine has: the curve misses the lone probes, and the
		// twin's first and last sequences decode in no time
		// (moe-decode/4105's short chatbot, ln b fitted past a lone probe
		// of 10.4 ms to a step of −3.8 ms, read at least 128 against a
		// truth of 54.1). A lent δe is a prior, its band the others'
		// spread, so the law keeps it where its own data leave it above
		// zero.
		if q.ok && q.fit.beta[0] > 0 && (q.fit.shows(experts) || levels != nil && q.fit.beta[experts] > 0) {
			p, x, lent, levelled = q, xc, nil, true
			if r > 0 {
				if _, l := shaped(0); l.ok && l.fit.beta[0] > 0 {
					p.wide = &l.fit
				}
			}
		}
	}
	if !levelled {
		for _, r := range x {
			r[experts] = 0
		}
		p.fitTo(x, y, groups, pr.ITL, pr, fitITL(most), slices.Concat(lent, priors)...)
	}
	// Where the steps carry prefill (δp fitted), the data cannot tell a
	// bend from the chunks: along a burst, the batch a probe decodes in
	// and the share of its decode spent in chunk steps move together, and
	// chunk time the harmonic law does not place (production's prompts
	// prefilling in the same steps, which s does not count, or δp held at
	// its bound) reads as a step growing faster than its batch. The
	// suite's chunked-prefill law, which has no bend, bent by 0.15-0.97
	// ms·(b − 1)² under load (seeds 4, 8903, 9103), and its short chatbot
	// read a third of its capacity or less. A bend stays where the steps
	// that carried no chunk show it by themselves (plainBend), or where
	// a use case whose batches reached further lends it.
	noise := func() bool { return p.fit.beta[curved] < p.fit.quantile()*math.Sqrt(p.fit.cov[curved][curved]) }
	chunked := func() bool {
		// A lent δp on a flat s column (above) confounds no bend.
		return p.fit.used[prefilling] && spread(x, prefilling) && p.fit.beta[prefilling] > 0 && !plainBend(x, y, groups, pr.scale())
	}
	if p.ok && len(lent) == 0 && p.fit.used[curved] && (noise() || chunked()) {
		// So is a bend the data cannot tell from noise: with it, a line's
		// noise would bend the extrapolation either way. The lower bound
		// still allows for either (wide).
		wide := p.fit
		p.wide = &wide
		for _, r := range x {
			r[curved] = 0
		}
		p.fitTo(x, y, groups, pr.ITL, pr, fitITL(most), priors...)
	} else if p.ok && p.fit.varies[curved] && !p.fit.used[curved] {
		// The bend was held at zero, its fit below it; its upper 95%
		// limit may still be above zero: not excluding a bend is not
		// knowing there is none, so the lower bound allows for that much.
		nonneg := slopesNonneg(len(x[0])) // every slope but the bend's
		nonneg[curved] = false
		if free, ok := fitITL(most)(x, y, groups, nonneg, slopePrior{}, pr.scale()); ok && free.used[curved] {
			if se := math.Sqrt(math.Max(free.cov[curved][curved], 0)); free.beta[curved]+free.quantile()*se > 0 {
				wide := p.fit
				wide.beta, wide.used = slices.Clone(wide.beta), slices.Clone(wide.used)
				wide.cov = slices.Clone(wide.cov)
				wide.cov[curved] = slices.Clone(wide.cov[curved])
				wide.beta[curved], wide.used[curved] = math.Max(free.beta[curved], 0), true
				wide.cov[curved][curved] = se * se
				p.wide = &wide
			}
		}
	}
	p.batches = measured
	if p.ok && p.fit.used[curved] {
		// A bend reaches as far as the batches it was measured at: this
		// use case's own, or the others' where they lent it. The
		// optimistic bound still takes it no further than this use case's
		// own batches (batches): how the others' bend carries over to this
		// prompt's sequences is the lending's assumption, not a
		// measurement.
		p.reach = measured
		if len(lent) > 0 {
			p.reach = math.Max(measured, pr.Bend.Batches)
			p.lentTo = pr.Bend.Batches
		}
	}
	if p.ok && p.fit.used[2] {
		// A server that fixes a request's speed on arrival (δa > 0) was
		// measured as far as the requests its probes arrived into, however
		// few of them shared their decode.
		p.reach = math.Max(p.reach, arrived)
	}
	return p
}

// concave says the ITL law's data show a step growing more slowly than its
// batch: ln b's coefficient, fitted with a line and no bend, above
// Student's t times its standard error (itlPart says why), in the steps
// that carried no prompt's chunk (s = 0), as a bend must show in them
// (plainBend): along a burst on an engine whose steps carry chunks, the
// share of a probe's decode spent in them falls as its batch grows, and
// the chunk time the harmonic law misses reads as a step that levels off
// (the suite's chunked-prefill law, which has none, read its short
// chatbot 1.5 times too high). Production's requests in a batch (prod)
// are of other contexts than the use case's, and what the law charges
// for that (δk, where the engine says its KV tokens; nothing where it
// does not) is a line, so a lone probe amid longer ones sits above the
// bursts' line and reads as a step that levels off
// (TestProductionOfOtherShapes). Here each of production's requests costs
// what one of the use case's does and a part of its own, of either sign,
// in a column of their count (in place of the bend's, which this fit
// leaves out): production's contexts beside the use case's are then a
// line in it, and what is left to bend is the batch's own.
func concave(x [][]float64, y []float64, groups []int, prod []float64, pr Prior, most float64, priors []priorRow) bool {
	var px [][]float64
	var py []float64
	var pg []int
	for i, r := range x {
		if r[prefilling] == 0 {
			line := slices.Clone(r)
			line[curved] = prod[i]
			px, py, pg = append(px, line), append(py, y[i]), append(pg, groups[i])
		}
	}
	if len(py) == 0 || !spread(px, experts) {
		return false
	}
	// The use case's own data, with no prior on the slope: the others'
	// lines would hold δb down and leave the growth to ln b
	// (itl-at-arrival/3's coding assistant, convex over its three levels,
	// fitted as a step levelling off).
	// Production's column is free in sign (fitTo holds every slope at or
	// above zero).
	free := func(x [][]float64, y []float64, groups []int, nonneg []bool, prior slopePrior, scale0 float64) (linearFit, bool) {
		nonneg = slices.Clone(nonneg)
		nonneg[curved] = false
		return fitITL(most)(x, y, groups, nonneg, prior, scale0)
	}
	var q part
	q.fitTo(px, py, pg, Ratio{}, pr, free, priors...)
	if !q.ok {
		return false
	}
	// A burst's probes are one measurement (the fit's clusters), and a
	// shape is told only between them: Student's t at the groups less
	// the coefficients. A curve through as many groups as it has
	// coefficients fits any of them, and the probes' scatter about their
	// own burst says nothing of its shape (itl-at-arrival/4's code
	// completion: a lone probe and two bursts, convex, fitted as a step
	// of −9.8 ms levelling off, the lone probe left as an outlier).
	between := q.fit
	between.df = float64(distinct(pg) - cols(q.fit.used))
	return between.shows(experts)
}

// distinct is how many different values groups holds.
func distinct(groups []int) int {
	seen := map[int]bool{}
	for _, g := range groups {
		seen[g] = true
	}
	return len(seen)
}

// plainBend says the observations that decoded with no prompt waiting
// (s = 0), fitted alone, show the bend: δ2 above Student's t times its
// standard error. Their steps carried no chunk of a prompt the probe saw
// waiting, so what bends them is the decode's own: report 001's
// simulator, whose decode runs eagerly past a batch of 18, bent its code
// completion's steps by 24-31 µs·(b − 1)² at every seed of the reports'
// table, chunk steps or not.
func plainBend(x [][]float64, y []float64, groups []int, scale0 float64) bool {
	px, py, pg := plain(x, y, groups)
	if len(py) == 0 {
		return false
	}
	f, ok := fitLinear(px, py, pg, slopesNonneg(len(px[0])), slopePrior{}, scale0)
	return ok && f.shows(curved)
}

// plain is the observations that decoded with no prompt waiting (s = 0):
// their steps are the decode step D alone.
func plain(x [][]float64, y []float64, groups []int) (px [][]float64, py []float64, pg []int) {
	for i, r := range x {
		if r[prefilling] == 0 {
			px, py, pg = append(px, r), append(py, y[i]), append(pg, groups[i])
		}
	}
	return px, py, pg
}
