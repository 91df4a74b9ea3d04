package capacity

import (
	"math"
	"slices"
)

// Prior is what a target's other use cases say of one use case's laws
// before its own bursts do: how steeply TTFT and ITL grow per request sent
// together, relative to what one request alone spends on work that grows
// with its prompt. Requests queued together wait for one another's
// prefill, each about as long as its own compute; a decode step reads
// every sequence's KV cache, each as long as its own; a server may or may
// not repeat for each the fixed part every request pays (an API server's
// overhead outside the queue, a decode step's base). So the slope is
// Value·(intercept − Fixed) at any prompt length, Fixed where the sloped
// use cases' slopes against their intercepts reach zero (fixedPart).
// Report 000's TTFT tables: the mean TTFT's growth per request together
// over the TTFT alone less 0.35 s is 0.79 to 0.96 from 8K to 96K prompts;
// over the whole TTFT alone, 0.33 to 0.88. A server that queues its
// overhead with the prefill has Fixed 0. Scale is the relative residual
// scale of the others' fits, Reach the most requests together their data
// hold. The zero Prior knows nothing.
type Prior struct {
	TTFT, ITL Ratio
	// Bend and Levels are the ITL law's δ2 and δe as the others lend
	// them (Curvature).
	Bend, Levels Curvature
	// Step is what a decode step that carries a chunk of prefill adds
	// (δp), as the nearest use case whose prompt is no shorter measured
	// it (Slopes.Step); zero where none did.
	Step Measured
	// Lag is the part of a TTFT before the engine takes the prompt, the
	// same for every prompt (lag).
	Lag   float64
	Scale float64
	Reach float64
	// Past is δb as the other use case whose steps levelled off at the
	// most batches measured it (Value, its standard error SE, those
	// Batches), of those whose sequences hold no more KV tokens than this
	// one's: what a sequence adds to a step past the experts' levelling,
	// at least (levelled). Zero: none known.
	Past Curvature
}

// Curvature is a term that bends a decode step's growth with its batch away
// from a line, as one use case's own data measured it (Value, its
// standard error SE), or as the target's other use cases lend it (SE then
// counts their spread), and the batches it was measured at (Batches):
// the bend δ2 or the levelling δe of the ITL law. Either is the engine's,
// not the prompt's. A step grows faster than its batch where the engine
// turns compute-bound: each sequence in a step is one token of the
// weights' matrix products, whatever its context. It grows more slowly
// where a mixture of experts reads each expert once for every token
// routed to it: which experts a step reads depends on how many tokens it
// decodes, not on what they attend. So a cheap short prompt's bursts,
// which reach large batches, measure either for a long one's, whose
// bursts cannot (each of its short probes decodes beside the few whose
// prefill ended near its own). Zero: none known.
type Curvature struct {
	Value, SE, Batches float64
	// Shape is a levelling's (levelColumn's r, k/E): 0 for ln b, and for
	// a bend. A levelling's value is in its shape's units.
	Shape float64
}

// levelled is δb as the use case whose steps levelled off (δe kept) at the
// most batches measured it, of those whose sequences hold no more KV
// tokens than held: past the batches where a mixture of experts reads all
// of them, a step grows by each sequence's own reads, and a longer one's
// reads are no fewer. A line through batches where the experts still rise
// takes their rise into δb: moe-decode/4103's document (128 experts, 8 a
// token), its steps measured at batches 1, 4 and 8, fitted δb 1.19 ms,
// where its 32K use case's, measured to 44, read 0.40 and the law adds
// 0.33 ms a sequence past the experts' levelling.
func levelled(others []Slopes, held float64) Curvature {
	var out Curvature
	for _, o := range others {
		if o.Levels.Batches > out.Batches && o.Held <= held && o.ITL.Value > 0 {
			out = Curvature{Value: o.ITL.Value, SE: o.ITL.SE, Batches: o.Levels.Batches}
		}
	}
	return out
}

// scale is the relative residual scale a fit starts from: the target's
// other use cases', or a probe's typical scatter where none is known.
func (pr Prior) scale() float64 {
	if pr.Scale > 0 {
		return pr.Scale
	}
	return typicalScale
}

// Ratio is one relative slope, its standard error for one more use case
// (SE 0: unknown; the others' spread included) and the fixed part of the
// intercept it is relative to.
//
// Slope > 0 is the slope itself, SlopeSE its standard error: the ITL law's
// prior read off the others' slopes against the KV tokens their sequences
// hold (perSequence), which takes the place of Value where known. PerKV,
// with PerKVSE > 0, is that line's own slope, what a thousand KV tokens a
// sequence holds add to a step: the prior of the ITL law's δk, PerKVSE how
// far it may be off for this use case.
//
// Ceiling, where known, is the most the law's intercept can be: one
// request alone is no slower than one of a heavier use case alone
// (ceiling).
type Ratio struct {
	Value, SE, Fixed, Slope, SlopeSE, PerKV, PerKVSE float64
	Ceiling                                          Limit
}

// Limit is an upper 95% limit on a coefficient (Value; 0: none known)
// and the standard error of the estimate it is the limit of.
type Limit struct{ Value, SE float64 }

// Alone is what a use case's own data say of a law's intercept, one
// request alone: its estimate, standard error, and the two-sided 95%
// quantile of Student's t at its fit's degrees of freedom (T 0: none).
type Alone struct{ Value, SE, T float64 }

// priorSpread is how far a slope taken from the target's other use cases
// may be off for this one, as a share of it, where their data cannot say:
// one sloped use case alone (randomEffects), and the ITL slope's line in
// held tokens (perSequence). Physics shares the ratio only roughly across
// prompt lengths, and a scripted server's law need not share it at all,
// so such a prior counts for little beside a use case's own bursts.
const priorSpread = 0.5

// Slopes is what one use case's own data say of its laws, for its
// target's other use cases' priors (Pool): each law's intercept, and its
// slope where its own data slope it, with the scale of its fits and its
// reach.
type Slopes struct {
	TTFT, ITL Slope
	// Bend and Levels are the ITL law's δ2 and δe where its own data
	// kept them (Curvature).
	Bend, Levels Curvature
	Scale, Reach float64
	// Held is the KV tokens one of its requests holds (UseCase.held): what
	// each sequence of its batch reads in a decode step. Prompt is its
	// prompt's tokens: what its prefill computes.
	Held, Prompt float64
	// TTFTAlone and ITLAlone are the laws' intercepts (one request
	// alone), where its own data fit them; no TTFTAlone for a warm
	// prefix's (UseCase.Warm).
	TTFTAlone, ITLAlone Alone
	// InSteps says its own data show decode steps that carry a chunk of
	// prefill (chunks), δp − δ0 above zero beyond its 95% band; Step is
	// then its δp and standard error.
	InSteps bool
	Step    Measured
	// Lag is τ0 − τq where its own TTFT law slopes: what a prompt waits
	// alone that it does not add to one queued behind it, the part of a
	// TTFT before the engine takes the prompt (Prior.Lag).
	Lag Measured
}

// Measured is a coefficient as one use case's own data fitted it, and its
// standard error.
type Measured struct{ Value, SE float64 }

// Slope is one law's intercept and slope (SE 0: no slope known).
type Slope struct{ Intercept, Value, SE float64 }

// Ratios is what one use case's own data say of its laws (Slopes).
func Ratios(u UseCase, points []Point) Slopes {
	os := observations(u.weighed(points), u.held())
	out := Slopes{Held: u.held(), Prompt: float64(u.InputTokens)}
	ttft := ttftPart(os, Prior{})
	itl := itlPart(prefillShares(os, ttft, float64(u.InputTokens)), Prior{}, ttft.prefill())
	out.ITLAlone = itl.alone()
	if !u.Warm {
		out.TTFTAlone = ttft.alone()
	}
	if g := itl.fit; chunks(itl) {
		// Beyond the fit's uncertainty: an outlier among a burst's
		// decodes can lengthen the steps with prompts waiting by chance.
		v := g.cov[prefilling][prefilling] + g.cov[0][0] - 2*g.cov[0][prefilling]
		out.InSteps = g.beta[prefilling]-g.beta[0] > g.quantile()*math.Sqrt(v)
		if vp := g.cov[prefilling][prefilling]; out.InSteps && vp > 0 && !math.IsInf(vp, 0) {
			// Measured, not held at a bound (fitITL's: held, it has no
			// variance), which is a limit and no step to lend.
			out.Step = Measured{Value: g.beta[prefilling], SE: math.Sqrt(vp)}
		}
	}
	for _, c := range []struct {
		col int
		to  *Curvature
	}{{curved, &out.Bend}, {experts, &out.Levels}} {
		if f := itl.fit; itl.ok && f.used[c.col] && f.cov[c.col][c.col] > 0 && !math.IsInf(f.cov[c.col][c.col], 0) {
			*c.to = Curvature{Value: f.beta[c.col], SE: math.Sqrt(f.cov[c.col][c.col]), Batches: itl.batches}
			if c.col == experts {
				c.to.Shape = itl.saturate
			}
		}
	}
	for _, p := range []struct {
		part part
		to   *Slope
	}{{ttft, &out.TTFT}, {itl, &out.ITL}} {
		f := p.part.fit
		if !p.part.ok || !(f.beta[0] > 0) {
			continue
		}
		p.to.Intercept = f.beta[0]
		if !f.used[1] || math.IsInf(f.cov[1][1], 0) {
			continue
		}
		p.to.Value, p.to.SE = f.beta[1], math.Sqrt(f.cov[1][1])
		out.Scale = math.Max(out.Scale, f.scale)
		out.Reach = math.Max(out.Reach, p.part.reach)
	}
	if f := ttft.fit; out.TTFT.SE > 0 {
		if v := f.cov[0][0] + f.cov[1][1] - 2*f.cov[0][1]; v > 0 && !math.IsInf(v, 0) {
			out.Lag = Measured{Value: f.beta[0] - f.beta[1], SE: math.Sqrt(v)}
		}
	}
	return out
}

// lag is the part of a TTFT before the engine takes the prompt (an API
// server's overhead, tokenizing: twin.lag), from the use cases whose own
// TTFT laws slope, self's among them, as the mean of their τ0 − τq by
// inverse variance: a lone prompt waits that part and its prefill (τ0), a
// prompt queued behind another waits the other's prefill more (τq), which
// the engine's work alone makes. It is the server's, the same for every
// prompt, so the short prompts, whose times are a few milliseconds about
// it, measure it for the long ones, whose are seconds. Where engine work
// makes it (a prompt ahead costing its overhead too: the suite's
// one-prefill-at-a-time and chunked laws) it is zero, and it is no more
// than the least intercept's upper 95% limit: a TTFT has no part longer
// than itself, and a short prompt's intercept read amid production is
// often well below its lone probes' (report 002's code completion, 12 ms
// ± 40 against 75). fixed (Ratio.Fixed) where no use case slopes.
func lag(all []Slopes, fixed float64) float64 {
	sum, weight, least := 0.0, 0.0, math.Inf(1)
	for _, o := range all {
		if l := o.Lag; l.SE > 0 {
			sum += l.Value / (l.SE * l.SE)
			weight += 1 / (l.SE * l.SE)
			if a := o.TTFTAlone; a.Value > 0 {
				least = math.Min(least, a.Value+a.T*a.SE)
			}
		}
	}
	if weight == 0 {
		return fixed
	}
	return math.Min(math.Max(sum/weight, 0), least)
}

// Pool is the prior for one use case from the others' Slopes: per law,
// the fixed part of the intercept (fixedPart), and each sloped other's
// slope over its intercept less it, pooled as a random-effects mean
// (randomEffects): the ratios differ between prompt lengths by more than
// their standard errors, so the prior for one more use case is a draw
// from their spread, not their mean. The bends and levellings their own
// data kept pool the same way, as themselves (poolCurvature). The scale
// is their median, the reach their most. Each law's ceiling is the
// heavier others' (ceiling), self's size the one it is held to.
func Pool(others []Slopes, self Slopes) Prior {
	var out Prior
	held := self.Held
	pool := func(get func(Slopes) Slope) Ratio {
		var sloped []Slope
		for _, o := range others {
			if s := get(o); s.SE > 0 && s.Value > 0 && s.Intercept > 0 {
				sloped = append(sloped, s)
			}
		}
		fixed := fixedPart(sloped)
		var v, se []float64
		for _, s := range sloped {
			if work := s.Intercept - fixed; work > 0 {
				v, se = append(v, s.Value/work), append(se, s.SE/work)
			}
		}
		m, sd, ok := randomEffects(v, se)
		if !ok {
			return Ratio{}
		}
		return Ratio{Value: m, SE: sd, Fixed: fixed}
	}
	out.TTFT = pool(func(s Slopes) Slope { return s.TTFT })
	out.Lag = lag(append(slices.Clone(others), self), out.TTFT.Fixed)
	out.ITL = pool(func(s Slopes) Slope { return s.ITL })
	steps := self.InSteps || slices.ContainsFunc(others, func(o Slopes) bool { return o.InSteps })
	if m, se, kv, kvSE, ok := perSequence(others, held, steps); ok {
		out.ITL.Slope, out.ITL.SlopeSE, out.ITL.PerKV, out.ITL.PerKVSE = m, se, kv, kvSE
	}
	out.TTFT.Ceiling = ceiling(others, func(o Slopes) (float64, Alone) { return o.Prompt, o.TTFTAlone }, self.Prompt)
	out.ITL.Ceiling = ceiling(others, func(o Slopes) (float64, Alone) { return o.Held, o.ITLAlone }, held)
	out.Step = lentStep(others, self.Prompt)
	out.Bend = poolCurvature(others, func(o Slopes) Curvature { return o.Bend })
	out.Levels = poolCurvature(others, func(o Slopes) Curvature { return o.Levels })
	out.Past = levelled(others, held)
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

// poolCurvature is the curvature the others' own data kept (of), pooled as
// themselves by randomEffects, reaching as far as the furthest of their
// batches; zero where none kept it. A levelling's value is one of its
// shape's: the shape is the one measured at the most batches, the nearest
// to where every expert is read, and only the others of that shape pool
// with it.
func poolCurvature(others []Slopes, of func(Slopes) Curvature) Curvature {
	shape, most := 0.0, 0.0
	for _, o := range others {
		if c := of(o); c.Value > 0 && c.SE > 0 && c.Batches > most {
			shape, most = c.Shape, c.Batches
		}
	}
	var v, se []float64
	batches := 0.0
	for _, o := range others {
		if c := of(o); c.Value > 0 && c.SE > 0 && c.Shape == shape {
			v, se = append(v, c.Value), append(se, c.SE)
			batches = math.Max(batches, c.Batches)
		}
	}
	m, sd, ok := randomEffects(v, se)
	if !ok {
		return Curvature{}
	}
	return Curvature{Value: m, SE: sd, Batches: batches, Shape: shape}
}

// lentStep is δp as the use case with the shortest prompt no shorter than
// prompt measured it (Slopes.Step), its standard error widened by
// priorSpread: a step that carries a chunk of prefill takes as long as
// the chunk, the engine's, whatever prompt it comes from, once the prompt
// fills a chunk; a shorter one fills less of it. Zero where none did.
func lentStep(others []Slopes, prompt float64) Measured {
	var out Measured
	nearest := math.Inf(1)
	for _, o := range others {
		if o.InSteps && o.Step.Value > 0 && o.Prompt >= prompt && o.Prompt < nearest {
			nearest = o.Prompt
			out = Measured{Value: o.Step.Value, SE: math.Hypot(priorSpread*o.Step.Value, o.Step.SE)}
		}
	}
	return out
}

// ceiling is the least upper 95% limit of a law's intercept among the use
// cases at least as heavy as this one (of: at their size, what their own
// data say; size: the tokens a prefill computes, or a decode step reads
// per sequence). A longer prompt's prefill alone computes more, and a
// sequence holding more KV tokens reads more in each step alone, so
// neither is quicker. A use case's own intercept can rest on one lone
// probe that met an outlier, or on probes under production whose charge
// its terms misplace; a heavier one's bounds it. The mirror, a lighter
// one's lower limit as a floor, is not taken
// (docs/capacity-model-changelog.md): a heavier prompt's intercept may lie
// far above a lighter one's, and held at that floor, laws under production
// whose fits put its charge in their slopes placed thresholds 2x low.
func ceiling(others []Slopes, of func(Slopes) (float64, Alone), size float64) Limit {
	var out Limit
	for _, o := range others {
		at, a := of(o)
		if up := a.Value + a.T*a.SE; a.T > 0 && at >= size && (out.Value == 0 || up < out.Value) {
			out = Limit{Value: up, SE: a.SE}
		}
	}
	return out
}

// randomEffects is the DerSimonian-Laird random-effects mean of values v
// with standard errors se, and the standard error of one more value drawn
// from the same spread: sqrt(τ² + var(mean)). τ² is the variance between
// the values beyond their own errors (Cochran's Q less its degrees of
// freedom, over the weights' spread), one for all of them, so that no one
// value's tight error makes it speak for the rest. A few values often
// show none (DerSimonian-Laird's known bias at small k; one value cannot
// show any), while physics shares the ratio only roughly across prompt
// lengths: τ is at least priorSpread's share of the mean.
func randomEffects(v, se []float64) (mean, predSE float64, ok bool) {
	if len(v) == 0 {
		return 0, 0, false
	}
	var sw, sw2, swv float64
	for i := range v {
		w := 1 / (se[i] * se[i])
		sw, sw2, swv = sw+w, sw2+w*w, swv+w*v[i]
	}
	var q float64
	for i := range v {
		d := v[i] - swv/sw
		q += d * d / (se[i] * se[i])
	}
	tau2 := 0.0
	if len(v) > 1 {
		tau2 = math.Max(0, (q-float64(len(v)-1))/(sw-sw2/sw))
	}
	weighted := func() (mean, sw float64) {
		var swv float64
		for i := range v {
			w := 1 / (se[i]*se[i] + tau2)
			sw, swv = sw+w, swv+w*v[i]
		}
		return swv / sw, sw
	}
	mean, sw = weighted()
	if floor := priorSpread * mean; tau2 < floor*floor {
		tau2 = floor * floor
		mean, sw = weighted()
	}
	if !(sw > 0) || math.IsInf(sw, 0) || math.IsNaN(mean) {
		return 0, 0, false
	}
	return mean, math.Sqrt(tau2 + 1/sw), true
}

// perSequence is the ITL law's slope for a use case whose sequences hold
// held KV tokens, from the others' slopes at the tokens theirs hold: each
// sequence in a decode step costs its own reads of its KV cache, and
// compute, so the slope is a line in what it holds, c + κ·held, κ at or
// above zero (zero where a server charges another sequence the same at any
// context). The line is fitted to their slopes on relative error, its
// scatter pooled with priorSpread's (the random effect of Pool: slopes at
// two lengths differ by more than their own standard errors, which only
// say that each is sloped), and read at held with its standard error
// there. A slope its own data cannot tell from zero (no larger than its
// standard error) is no point of the line: on relative error its weight
// grows without bound as it nears zero. On the suite's one-at-a-time law,
// a 96K use case's probes, each decoding alone, fitted δb 1.7·10⁻¹⁷ ±
// 0.86 ms; the line went through it at zero, and held the short chatbot's
// δb there against its own burst of 32 decoding together, its bend taking
// the slope (52.2 [50.7, 61.4] against 72.1).
//
// Where the engine's decode steps carry chunks of prefill (steps: some use
// case's data show it, chunks), a step is one pass over every sequence, and
// what a longer context adds to one sequence's step alone (loneKV) it adds
// again for each such sequence in the batch: κ is then held at that, and
// the others' slopes set only the line's level, one of them enough. The
// others' slopes, at short contexts whose reads differ little, cannot say
// κ themselves: on the suite's chunked-prefill/4 the 1K and 8K use cases'
// line read 1.6 ms a sequence at 96K where the law's step charges 4.6 ms,
// and the 96K use case, its prompts prefilled one after another so that
// its bursts never decode two together, read 15.0 against 7.7. Held so, κ
// is known to priorSpread's share, which the line's standard error at held
// counts. A server whose decode a prompt waiting does not lengthen is not
// shown to be such an engine, and may charge another request the same at
// any context: the suite's one-prefill-at-a-time law does, and lent the
// lone steps' κ as well (not kept), its idle 96K use case read 4.9
// against 17.1.
//
// kv is the line's slope, per thousand tokens, and kvSE how far it may be
// off for this use case: its standard error and priorSpread's share (0
// where the fit held it at zero). ok is false with fewer than two sloped
// use cases of different lengths (one where κ is the lone steps'), or where
// the line is not above zero at held.
func perSequence(others []Slopes, held float64, steps bool) (m, se, kv, kvSE float64, ok bool) {
	var x [][]float64
	var y []float64
	for _, o := range others {
		if s := o.ITL; s.SE > 0 && s.Value > s.SE && o.Held > 0 {
			x, y = append(x, []float64{1, o.Held / 1000}), append(y, s.Value)
		}
	}
	lone, byLone := loneKV(others)
	byLone = byLone && steps
	if len(y) == 0 || !byLone && (len(y) < 2 || !spread(x, 1)) {
		return 0, 0, 0, 0, false
	}
	var prior slopePrior
	if byLone {
		prior.rows = []priorRow{{col: 1, value: lone, sd: pinned * lone}}
	}
	f, fitted := fitLinear(x, y, nil, []bool{false, true}, prior, priorSpread)
	if !fitted {
		return 0, 0, 0, 0, false
	}
	h := held / 1000
	m = f.beta[0] + f.beta[1]*h
	v := f.cov[0][0] + 2*h*f.cov[0][1] + h*h*f.cov[1][1]
	if !(m > 0) || !(v >= 0) || math.IsInf(v, 0) {
		return 0, 0, 0, 0, false
	}
	switch {
	case byLone:
		// Held, κ is known to priorSpread's share: about the held
		// where the line's level is known best (c), its error grows
		// with the distance from it.
		kv, kvSE = lone, priorSpread*lone
		if f.cov[1][1] > 0 {
			c := -f.cov[0][1] / f.cov[1][1]
			v += (h - c) * (h - c) * (kvSE*kvSE - f.cov[1][1])
		}
	case f.used[1] && f.cov[1][1] > 0 && !math.IsInf(f.cov[1][1], 0):
		kv, kvSE = f.beta[1], math.Hypot(priorSpread*f.beta[1], math.Sqrt(f.cov[1][1]))
	}
	return m, math.Sqrt(v), kv, kvSE, true
}

// loneKV is what one request alone says a thousand KV tokens add to a
// decode step: the slope of the use cases' ITL intercepts in the tokens
// their sequences hold, as the median of the slopes between every two of
// them (Theil and Sen's), three such slopes at least, of lengths apart by
// more than leastSpread. An intercept fitted beside a prefill term can sit
// well off the lone step, and one such point would tilt a least-squares
// line (chunked-prefill/4: 1K, 32K, 64K at 11.2, 12.1, 13.0 ms, 0.028 ms
// per 1K tokens, and 8K at 15.2).
func loneKV(others []Slopes) (kv float64, ok bool) {
	var slopes []float64
	for i, a := range others {
		for _, b := range others[i+1:] {
			if a.ITLAlone.T > 0 && b.ITLAlone.T > 0 && math.Abs(b.Held-a.Held)/1000 > leastSpread && a.Held > 0 && b.Held > 0 {
				slopes = append(slopes, (b.ITLAlone.Value-a.ITLAlone.Value)/(b.Held-a.Held)*1000)
			}
		}
	}
	if len(slopes) < 3 {
		return 0, false
	}
	kv = Statistic(slopes, "p50")
	return kv, kv > 0
}

// fixedPart is the part of a law's intercept that a request queued or
// batched beside another does not repeat: where the sloped use cases'
// slopes fall on a line in their intercepts, slope = κ·(intercept − fixed),
// the intercept at which that line reaches zero. 0 where fewer than two
// intercepts differ, where the line says the slope does not grow with the
// intercept, or where it would reach zero at or past the smallest of them
// (the data then say nothing of a fixed part).
func fixedPart(sloped []Slope) float64 {
	if len(sloped) < 2 {
		return 0
	}
	least := math.Inf(1)
	for _, s := range sloped {
		least = math.Min(least, s.Intercept)
	}
	x := make([][]float64, len(sloped))
	y := make([]float64, len(sloped))
	for i, s := range sloped {
		// In units of the least intercept: the column's spread is in them.
		x[i], y[i] = []float64{1, s.Intercept / least}, s.Value
	}
	f, ok := fitLinear(x, y, nil, []bool{false, true}, slopePrior{}, 0)
	if !ok || !f.used[1] || !(f.beta[1] > 0) || !(f.beta[0] < 0) {
		return 0
	}
	fixed := -f.beta[0] / f.beta[1] * least
	if fixed >= least {
		return 0
	}
	return fixed
}
