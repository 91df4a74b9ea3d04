package capacity

import (
	"math"
	"slices"
)

// part is one fitted law, TTFT's or ITL's.
type part struct {
	fit   linearFit
	ok    bool
	reach float64 // the most requests together the data hold
	// batches is the largest batch the ITL law's data decoded in: how far
	// they measured its bend, whatever δa's reach.
	batches float64
	// lentTo is how far the use case that lent this law its bend measured
	// it (Prior.Bend.Batches); 0 where the bend is its own, or none.
	lentTo float64
	// least is the smallest batch the ITL law's data decoded in.
	least float64
	// wide is the fit with a term the data could not tell from noise
	// still in it (the bend): not telling it from zero is not knowing it
	// is zero, so the pessimistic bound is taken from this fit as well.
	// Beside a saturating levelling it is the fit with ln b instead, which
	// goes on rising past the batches measured: no batch measured says the
	// experts are all read beyond them. Its levelling, if any, is ln b.
	wide *linearFit
	// saturate is the shape of the ITL law's levelling where it has one
	// (levelColumn's r): 0 for ln b.
	saturate float64
}

// ttftPart fits TTFT = τ0 + τq·(q−1) + τw·w + τd·d: τq per prompt
// prefilled ahead of it, τw per prompt beside it that waits for prefill
// too, τd per sequence decoding beside it. Engines differ in the last two:
// one that prefills the waiting prompts together (each taking a share of a
// step's chunk budget) charges every prompt beside it as one ahead, and a
// decoding sequence little; one that prefills first come first served in
// chunks, in steps that also decode, charges the prompts behind it nothing
// and every decoding sequence a step's share of each chunk; a server that
// charges every request in flight alike charges both the same.
func ttftPart(os []obs, pr Prior) part {
	var p part
	x, y, groups := make([][]float64, 0, len(os)), make([]float64, 0, len(os)), make([]int, 0, len(os))
	const width = 5
	cells := make([]float64, 0, width*len(os)) // the rows' one backing array
	for _, o := range os {
		if o.ttft > 0 && !math.IsInf(o.ttft, 0) {
			cells = append(cells, 1, o.q-1, o.w, o.d, o.kv)
			row := cells[len(cells)-width : len(cells) : len(cells)]
			x, y, groups = append(x, row), append(y, o.ttft), append(groups, o.group)
			p.reach = math.Max(p.reach, o.level)
		}
	}
	p.fitTo(x, y, groups, pr.TTFT, pr, fitLinear)
	return p
}

// decoders charges the TTFT law's decoding sequences where no probe
// waited beside any (an idle server's bursts, whose short probes decode
// for a moment each), from the engine's physics. A sequence decoding
// beside a prompt costs at least what a prompt waiting beside it does
// (τw): the charge of a server that charges every request in flight
// alike. An engine that prefills in chunks, in the steps that decode,
// costs more: a step that carries a chunk lasts δ0+δp, a prompt ahead
// of another takes τq, so a prompt's prefill spans τq/(δ0+δp) steps, and
// each sequence decoding beside it makes every one of them δb longer. A
// step that carries a chunk is told from one that merely counts the
// prompts waiting by its length: a chunk is hundreds of tokens of
// prefill, more work than a step's bare decode (δp > δ0); a server whose
// steps grow less with a prompt waiting is not charged so. inSteps says
// it charged so: the same steps carry the prompts ahead of it, so the
// twin lengthens every prefill before a first token with the batch
// (twin.inSteps). Where the data slope the charge themselves (lone probes
// amid production), it is what a probe met, production's prefills among
// it, not a step's share, and the twin keeps it to the probe's own.
func decoders(ttft *part, itl part) (inSteps bool) {
	f := &ttft.fit
	if !ttft.ok || f.varies[decoding] {
		return false
	}
	charge, v, used := f.beta[queued], f.cov[queued][queued], f.used[queued]
	if g := itl.fit; chunks(itl) && g.used[1] && f.used[1] {
		steps := f.beta[1] / (g.beta[0] + g.beta[prefilling])
		if c := steps * g.beta[1]; c > charge {
			charge, v, used, inSteps = c, steps*steps*g.cov[1][1], true, true
		}
	}
	f.beta[decoding], f.used[decoding], f.cov[decoding][decoding] = charge, used, v
	return inSteps
}

// chunks says the ITL law's data show decode steps that carry a chunk of
// prefill: a step with prompts waiting lasts more than twice a bare one
// (δp > δ0; decoders says why).
func chunks(itl part) bool {
	g := itl.fit
	return itl.ok && g.used[prefilling] && g.beta[prefilling] > g.beta[0]
}

// slopesNonneg is fitLinear's nonneg for a law of n columns: the
// intercept free, every slope held at or above zero (more load never makes
// a server faster).
func slopesNonneg(n int) []bool {
	nonneg := make([]bool, n)
	for j := 1; j < n; j++ {
		nonneg[j] = true
	}
	return nonneg
}

// fitTo fits the part to its data, with the slope the target's other use
// cases imply as a prior: r's slope itself where it has one (perSequence),
// else its ratio of slope to intercept, which physics shares across prompt
// lengths (Prior). Either holds only roughly: the ratio's SE is the spread
// between the others' ratios (randomEffects), the slope is held to within
// priorSpread of its value, and a use case's own bursts soon outweigh
// either. The intercept is held at most at r's ceiling, and the ratio's
// prior taken at the intercept so held.
func (p *part) fitTo(x [][]float64, y []float64, groups []int, r Ratio, pr Prior, fitWith fitter, lent ...priorRow) {
	if len(y) == 0 {
		return
	}
	nonneg := slopesNonneg(len(x[0]))
	scale0 := pr.scale()
	own, ok := fitWith(x, y, groups, nonneg, slopePrior{}, scale0)
	p.fit, p.ok = own, ok && len(y) >= MinSamples
	if !ok {
		return
	}
	alone := own.beta[0]
	if c := r.Ceiling.Value; c > 0 {
		alone = math.Min(alone, c)
	}
	rows := slices.Clone(lent)
	switch work := alone - r.Fixed; {
	case r.Slope > 0:
		rows = append(rows, priorRow{col: 1, value: r.Slope, sd: math.Hypot(priorSpread*r.Slope, r.SlopeSE)})
	case r.SE > 0 && r.Value > 0 && work > 0:
		// r.SE is already the spread between use cases (Pool).
		rows = append(rows, priorRow{col: 1, value: r.Value * work, sd: r.SE * work})
	}
	if len(rows) > 0 {
		p.fit, p.ok = fitWith(x, y, groups, nonneg, slopePrior{rows: rows, s2: own.scale * own.scale}, scale0)
		p.reach = math.Max(p.reach, pr.Reach)
	}
	if c := r.Ceiling; p.ok && c.Value > 0 && p.fit.beta[0] > c.Value {
		free := p.fit.cov[0][0]
		// Held at the ceiling, as an active constraint is: the slopes
		// refitted to what is left. The intercept is then known no
		// better than the heavier use case's is, nor than its own data
		// alone said: held, it would otherwise narrow the bands by what
		// no probe measured.
		rows = append(rows, priorRow{col: 0, value: c.Value, sd: c.Value * pinned})
		if f, ok := fitWith(x, y, groups, nonneg, slopePrior{rows: rows, s2: own.scale * own.scale}, scale0); ok {
			f.cov[0][0] = math.Max(math.Max(f.cov[0][0], c.SE*c.SE), free)
			p.fit = f
		}
	}
}

// pinned is a prior's standard deviation, as a share of its value, that
// holds a coefficient at it: the data's own weigh a thousandth as much.
const pinned = 1e-3

// alone is what the law's own data say of its intercept, one request
// alone; zero where not fitted, or not above zero.
func (p part) alone() Alone {
	f := p.fit
	if !p.ok || !(f.beta[0] > 0) {
		return Alone{}
	}
	se := math.Sqrt(f.cov[0][0])
	if !(se >= 0) || math.IsInf(se, 0) {
		return Alone{}
	}
	return Alone{Value: f.beta[0], SE: se, T: f.quantile()}
}

// prefill is a lone prompt's prefill by the TTFT law, its intercept; 0
// where not fitted.
func (p part) prefill() float64 {
	if !p.ok || !(p.fit.beta[0] > 0) {
		return 0
	}
	return p.fit.beta[0]
}

// slope says whether the fit knows how the quantity grows with requests
// sent together (a slope held at zero is known; so is one from a prior).
func (p part) slope() bool { return p.ok && p.fit.varies[1] }
