package capacity

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// The engine model. A request's latencies are affine in what it shares the
// server with, each term a named physical cost (docs/capacity-model.md):
//
//	TTFT = τ0 + τq·(q−1) + τw·w + τd·d   q: prompts prefilled ahead of it, itself
//	       + τk·k                         included; w: prompts beside it waiting
//	                                      for prefill too; d: sequences decoding
//	ITL  = 1 / (s/(D+δp) + (1−s)/D)      D, a decode step: δ0 + δb·(b−1) + δa·(a−b)
//	                                      + δ2·(b−1)² + δk·k; b: the batch it decoded
//	                                      in; a: requests in flight when it arrived,
//	                                      which fix the speed on servers that plan a
//	                                      request on arrival; s: the share of its
//	                                      decode's time while prompts were waiting
//	                                      for their first token, whose prefill makes
//	                                      each step δp longer; k: the KV tokens
//	                                      production's sequences hold beyond as many
//	                                      of the use case's shape (thousands)
//
// Every count is of requests of the use case's own shape, which is what its
// bursts measure and what the capacity asks; production's requests are of
// any shape, and a decode step reads every token its batch holds, so k
// charges what production holds beyond its count's worth (the engine's KV
// usage says): zero where production is of the use case's shape or the
// engine does not say, and the capacity's twin, with no production, never
// reads it.
//
// The twin (twin.go) runs these laws through the reports' protocol, N
// requests of the use case's shape together, for the capacity; with
// production's requests in flight beside them, for the free requests. Every
// slope is at or above zero (more load never makes a server faster), and the
// fits are robust (Huber): a probe that stalled behind something no term
// counts weighs as its distance.

// Reach is how far past the most requests the data hold together a fitted
// line is trusted to place a threshold: linear physics holds until
// something the data never met (a KV cache filling, a batch past the
// engine's CUDA graphs) bends it, and twice the measured range is where a
// benchmark's own next cell would go. Past it the capacity is a bound.
const Reach = 2.0

// horizon is how much further than the trusted range (Reach times the
// data's) the bounds look for a threshold: a band's optimistic edge
// crosses later than the estimate's line, and is found where the data
// bound it at all. A band that crosses nowhere within it, eight times the
// most requests the data hold together, bounds nothing (Upper +Inf, and
// the estimate is a bound): calibration's next burst goes at most leap
// times the highest level, so such a crossing is no burst's to measure.
const horizon = 4

// laterTurn: a burst's first token that comes more than this share of the
// burst's quickest TTFT after the one before came in a later step of the
// engine. The quickest TTFT lasts at least one step, and the first tokens
// of one step come together, apart by jitter far smaller than a step.
const laterTurn = 0.5

// MinSamples is the fewest observations a law is fitted to from its own
// data: one request alone and one level of requests together give its
// intercept and slope; how far they scatter comes from the target's other
// use cases, or a probe's typical scatter, until there are more
// (fitLinear's scale0). Where the other use cases lend a slope (fitTo),
// one observation and that slope make a law: requiring two there left use
// cases with neither a law nor bounds (docs/capacity.md).
const MinSamples = 2

// obs is one observation of the model: a lone probe, or one probe of a
// burst or of a bench cell.
type obs struct {
	// q: prompts ahead of it and itself; w: prompts beside it that wait
	// for prefill too (behind it); d: sequences decoding beside it; a: in
	// flight at arrival; b: decode batch.
	q, w, d, a, b  float64
	kv             float64 // k: production's KV tokens beyond its count's worth, thousands
	level          float64 // the requests together it stands for
	ttft, e2e, itl float64
	decodeOK       bool // itl is a decode the batch b describes
	// prefilling is the share of its decode during which other prompts
	// waited for their first token: an engine that runs prefill in the
	// steps that decode (chunked prefill, or a prefill step between two
	// decode steps) makes every such step longer by the prefill's chunk.
	prefilling float64
	// group tells the observations that share a moment apart: a burst's
	// or a bench cell's probes are one, each lone probe its own.
	group int
	// gap is the longest gap between two of its tokens (Point.MaxGap).
	gap float64
	// prompts: the prompt tokens per second the engine took in over an
	// engine reading's span (Point.Prompts), shorter prompts' scaled by
	// their length over the use case's; 0 for a probe.
	prompts float64
	// amid: production's requests ran in its batch.
	amid bool
}

// engineGroups numbers the groups of the engine's readings (observations),
// one a batch, past any probe's or burst's.
const engineGroups = 1 << 30

// observations turns a window's points into the model's observations: a
// lone probe at its level and load, and each probe of a burst or a bench
// cell by its place in it (below). perRequest is the KV tokens a request
// of the use case's shape holds, on average over its decode.
func observations(points []Point, perRequest float64) []obs {
	excess := func(p Point) float64 { return (p.KV - p.Held*perRequest) / 1000 }
	var out []obs
	groups := map[[3]int64][]Point{}
	var keys [][3]int64
	for _, p := range points {
		if p.Aftermath || math.IsNaN(p.Load) {
			continue
		}
		if p.Engine {
			// The engine's steps over production alone: each of the batch's
			// sequences arrived into it, none waits beside a prompt of its
			// own, and its mean interval counts the steps that prefilled.
			// The spans at one batch are one measurement of it, as a
			// burst's probes are of its level: sixty half minutes of a
			// steady production that sit 5% off the law say so once.
			b := p.InFlight
			o := obs{q: 1, level: b, a: b, b: b, kv: excess(p), itl: p.ITL, decodeOK: true, prefilling: p.Waiting, group: engineGroups + int(math.Round(b))}
			if p.Prompts > 0 {
				// A prompt's prefill grows at least as its length and at
				// most as its square: production's prompts shorter than the
				// use case's (their requests' KV tokens against its) take at
				// least their tokens' share of its prefill times their
				// length over its, and longer ones at least their tokens'.
				o.prompts = p.Prompts
				if held := p.KV / p.Held; held < perRequest {
					o.prompts *= held / perRequest
				}
			}
			out = append(out, o)
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
			// Production's prompts prefill in the steps a lone probe
			// decodes in, or between them, and no term counts them: its
			// typical step is the decode's own.
			itl := p.ITL
			if p.Steady > 0 {
				itl = p.Steady
			}
			out = append(out, obs{q: q, level: q, d: a - q, a: a, b: b, kv: excess(p), ttft: p.TTFT, e2e: p.E2E, itl: itl, decodeOK: true, group: len(out), gap: p.MaxGap,
				amid: b > 1})
			continue
		}
		k := [3]int64{p.Time.UnixNano(), int64(p.Burst), int64(p.Cell)}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], p)
	}
	for gi, k := range keys {
		g := groups[k]
		level := g[0].Load
		sent := g[0].Sent
		if !(sent >= 1) {
			sent = level
		}
		sent = math.Max(sent, level)
		// Each probe of a burst by the order of its first token: the
		// prompts ahead of it are production's (level less the burst) and
		// the burst's earlier ones; those behind it, with production's
		// running requests, are in flight beside it. A server that queues
		// prompts first come first served charges the first, one that
		// charges every request in flight alike the second: the spread of
		// a burst's TTFTs tells them apart.
		//
		// A probe the deadline or the straggler cut ended (Lost) held its
		// place all the same: by its first token, or, where none came,
		// behind every other, its prompt waiting to the end. Its TTFT is a
		// measurement; its decode is not. Left out, a lone survivor of a
		// burst of eight on llama.cpp stood seven prompts back, and its TTFT
		// of 2.8 s took the prefill's cost from 2.7 s a prompt to 0.33
		// (docs/real-engine.md).
		first := func(p Point) float64 {
			if p.Lost && !(p.TTFT > 0) {
				return math.Inf(1)
			}
			return p.TTFT
		}
		ordered := slices.SortedFunc(slices.Values(g), func(a, b Point) int { return cmp.Compare(first(a), first(b)) })
		ahead := math.Max(level-float64(len(g)), 0)
		running := sent - level
		spans, ends := make([]float64, 0, len(g)), make([]float64, 0, len(g))
		for _, p := range g {
			if !p.Lost {
				spans, ends = append(spans, p.E2E-p.TTFT), append(ends, p.E2E)
			}
		}
		span, ended := Statistic(spans, "p50"), Statistic(ends, "p50")
		lastFirst := first(ordered[len(ordered)-1])
		// beside[i] is how many of the burst's prompts after the i-th in
		// the order of first tokens waited beside it. Those whose first
		// tokens came in a later turn (more than half the burst's quickest
		// TTFT after the one before), several together, were prefilled
		// after it, in a later step of an engine whose step budget the
		// burst overfilled: report 000's simulator gave one probe of
		// thirteen its first token at 0.38 s and the twelve others theirs a
		// step later at 0.74 s, and counting the twelve beside the first
		// took the cost per prompt from 0.03 s to 0.018 (code completion
		// 41 against 21). A later turn of one stays beside it: the next of
		// a queue served first come first served, whose τw the fit reads
		// near zero either way, or a probe slowed after its prefill (an
		// outlier, which must not move its siblings). Those that never had
		// a first token waited to the end.
		beside := make([]float64, len(ordered))
		turns := make([]int, len(ordered)) // -1: no first token
		sizes := []int{1}
		for i := 1; i < len(ordered); i++ {
			switch f := first(ordered[i]); {
			case math.IsInf(f, 1):
				turns[i] = -1
				continue
			case f-first(ordered[i-1]) > laterTurn*first(ordered[0]):
				sizes = append(sizes, 0)
			}
			turns[i] = len(sizes) - 1
			sizes[turns[i]]++
		}
		for i := range ordered {
			for _, t := range turns[i+1:] {
				if t < 0 || t == turns[i] || sizes[t] == 1 {
					beside[i]++
				}
			}
		}
		for i, p := range ordered {
			if math.IsInf(first(p), 1) {
				continue // no first token: a place in the queue, no measurement
			}
			o := obs{q: ahead + float64(i+1), w: beside[i], d: running, a: sent, level: level,
				kv: excess(g[0]), ttft: p.TTFT, e2e: p.E2E, group: len(points) + gi, gap: p.MaxGap, amid: running > 0}
			if p.Cell > 0 {
				// A bench cell is a closed loop of its concurrency n, every
				// request of every round in it: one stands, on average,
				// amid a wave of n, half ahead of it; all decoded amid n,
				// the n−1 others each arriving once per E2E.
				o.q, o.d, o.a = (level+1)/2, (level-1)/2, level
				o.itl, o.b, o.decodeOK = p.ITL, level, true
				// Each of the n−1 others waits for its first token for
				// a TTFT of every E2E: the chance one of them does.
				o.prefilling = 1 - math.Pow(math.Max(1-p.TTFT/p.E2E, 0), level-1)
			} else if !p.Lost && !math.IsNaN(p.ITL) && span > 0 {
				// What it decoded beside, as a mean over its decode:
				// production's running requests, and each of the burst's
				// others for the share of its decode they decoded with it
				// (the requests in flight would count the prompts still
				// queued for prefill, which share no decode step). For the
				// batch its decode is taken to last the burst's median:
				// with its own length, a probe slowed by noise would seem
				// to have decoded beside fewer, and the batch's slope would
				// take the noise for the law.
				end := p.TTFT + span
				shared := 0.0
				for j, q := range ordered {
					if j == i {
						continue
					}
					// A lost one decoded from its first token until it
					// was cut, after every other had ended.
					qEnd := q.E2E
					if q.Lost {
						qEnd = math.Inf(1)
					}
					shared += math.Max(0, math.Min(end, qEnd)-math.Max(p.TTFT, first(q)))
				}
				// Production's running requests grew by Rise from the
				// burst's sending to its end (its median probe's, when the
				// engine was read): the burst slowed them, and slower
				// requests are more at once. Over this one's decode, by
				// the time its middle had come.
				production := running
				if rise := g[0].Rise; rise != 0 && ended > 0 {
					production = math.Max(running+rise*math.Min((p.TTFT+span/2)/ended, 1), 0)
				}
				o.itl, o.decodeOK = p.ITL, true
				o.b = 1 + production + shared/span
				// The burst's prompts waited for their first token until
				// the last of them came: s is the share of its own
				// decode's time until then, as the law's mean interval
				// weighs the slow steps by their time (fitITL).
				if own := p.E2E - p.TTFT; own > 0 {
					o.prefilling = math.Max(0, math.Min(p.E2E, lastFirst)-p.TTFT) / own
				}
				if running+ahead > 0 && o.prefilling < 0.5 && p.Steady > 0 {
					// Production's prompts prefill in its steps too, after
					// the burst's as well, and s counts the burst's alone:
					// as for a lone probe, its typical step is its decode's
					// own, where most of its steps only decoded.
					o.itl, o.prefilling = p.Steady, 0
				}
			}
			out = append(out, o)
		}
	}
	return out
}

// curved is the ITL law's column of (b−1)²: a decode step that grows faster
// than the batch once it is compute-bound, or reads a KV cache that grows
// with it. Physics bends it up, never down (held at or above zero).
const curved = 4

// part is one fitted law, TTFT's or ITL's.
type part struct {
	fit   linearFit
	ok    bool
	reach float64 // the most requests together the data hold
	// batches is the largest batch the ITL law's data decoded in: how far
	// they measured its bend, whatever δa's reach.
	batches float64
	// least is the smallest batch the ITL law's data decoded in.
	least float64
	// wide is the fit with a term the data could not tell from noise
	// still in it (the bend): not telling it from zero is not knowing it
	// is zero, so the pessimistic bound is taken from this fit as well.
	wide *linearFit
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
	var x [][]float64
	var y []float64
	var groups []int
	for _, o := range os {
		if o.ttft > 0 && !math.IsInf(o.ttft, 0) {
			x, y, groups = append(x, []float64{1, o.q - 1, o.w, o.d, o.kv}), append(y, o.ttft), append(groups, o.group)
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

// prefilling is the ITL law's column of s.
const prefilling = 3

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
// count's worth; bend is what stands for (b−1)² (twin.bend).
func itlRow(b, a, s, bend, k float64) [itlCols]float64 {
	return [itlCols]float64{1, b - 1, a - b, s, bend, k, math.Log(math.Max(b, 1))}
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

// queued and decoding are the TTFT law's columns of w, the prompts beside
// it that wait for prefill too, and d, the sequences decoding beside it;
// ttftKV and itlKV each law's column of k.
const (
	queued   = 2
	decoding = 3
	ttftKV   = 4
	itlKV    = 5
	// experts is the ITL law's column of ln b: the weights a step reads
	// for its batch's tokens together, which grow more slowly than the
	// batch where a mixture of experts routes each token to a few of its
	// experts (itlPart).
	experts = 6
	itlCols = experts + 1
)

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
	var x [][]float64
	var y []float64
	var groups []int
	var amid []bool
	arrived := 0.0
	p.least = math.Inf(1)
	for _, o := range os {
		if o.decodeOK && o.itl > 0 && !math.IsInf(o.itl, 0) {
			r := itlRow(o.b, o.a, o.prefilling, (o.b-1)*(o.b-1), o.kv)
			x, y, groups = append(x, r[:]), append(y, o.itl), append(groups, o.group)
			amid = append(amid, o.amid)
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
	// simulators' steps grow as the batch to a power of 0.06 to 0.44. ln b
	// is that growth's shape where neither k/E nor the power is known (the
	// power's limit as it goes to zero). The batches measured bend one way
	// or the other, so the law takes ln b or the bend, not both (the two
	// would fit a line's noise between them): ln b where the plain steps
	// show it (concave) and the whole law's fit keeps it beyond Student's
	// t; a line's noise would otherwise bend its extrapolation down,
	// towards a capacity too high.
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
	if own := concave(x, y, groups, amid, pr, most, priors); (own || levels != nil) && spread(x, experts) {
		if own {
			levels = nil
		}
		xc := make([][]float64, len(x))
		for i, r := range x {
			xc[i] = slices.Clone(r)
			xc[i][curved] = 0
		}
		q := p
		q.fitTo(xc, y, groups, pr.ITL, pr, fitITL(most), slices.Concat(levels, priors)...)
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
// chatbot 1.5 times too high). Nor in a batch with production's requests
// in it (obs.amid): their contexts differ from the use case's, and
// what the law charges for that (δk, where the engine says its KV
// tokens; nothing where it does not) is a line, so a lone probe amid
// longer ones sits above the bursts' line and reads as a step that
// levels off (TestProductionOfOtherShapes; the suite's KV-cliff law under
// production at seed 4103, whose chatbot went from 32.8 against 33.4 to
// a bound).
func concave(x [][]float64, y []float64, groups []int, amid []bool, pr Prior, most float64, priors []priorRow) bool {
	var px [][]float64
	var py []float64
	var pg []int
	for i, r := range x {
		if r[prefilling] == 0 && !amid[i] {
			line := slices.Clone(r)
			line[curved] = 0
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
	var q part
	q.fitTo(px, py, pg, Ratio{}, pr, fitITL(most), priors...)
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
type Curvature struct{ Value, SE, Batches float64 }

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
// batches; zero where none kept it.
func poolCurvature(others []Slopes, of func(Slopes) Curvature) Curvature {
	var v, se []float64
	batches := 0.0
	for _, o := range others {
		if c := of(o); c.Value > 0 && c.SE > 0 {
			v, se = append(v, c.Value), append(se, c.SE)
			batches = math.Max(batches, c.Batches)
		}
	}
	m, sd, ok := randomEffects(v, se)
	if !ok {
		return Curvature{}
	}
	return Curvature{Value: m, SE: sd, Batches: batches}
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

// fitted is what a use case's laws say of its capacity, before the load
// now: all of it rests on the window's points alone, so it is kept while
// they do not change (Memo). It keeps what a reading at another load needs
// of the laws, their coefficients, and not the fits they came from: a
// fit's residuals and covariances are per observation or per pair of
// terms, and a daemon keeps a fitted for every target and use case.
type fitted struct {
	laws twin // the use case's shape, the KV cache and the laws
	// ttftSE and itlSE are the laws' coefficients' standard errors
	// (standardErrors), for Estimate.Model.
	ttftSE       [ttftKV + 1]float64
	itlSE        [itlCols]float64
	slos         []SLO // Capacity, Lower, Upper, Curve and Why of each
	lower, upper float64
	why          string
	// aim is the laws' crossing, placed or not, reach the most requests
	// together the binding laws' data hold: where calibration goes next.
	aim, reach float64
	// bound: the data cannot place the capacity (only lower); sloped:
	// every law has a slope; decodeShort: no capacity for want of decode
	// data, where bursts were sent (a decode threshold binds past the ITL
	// law's reach, which is short of the TTFT law's, or the ITL law has no
	// slope where the TTFT law has one).
	bound, sloped, decodeShort bool
	capacity                   float64

	mu       sync.Mutex
	readings [readings]keyedReading // the last few, newest at next-1
	next     int
}

// fit fits the laws to os and runs them in the twin (twin.go) with output
// tokens per request: the capacity, its bounds, each SLO's own.
func fit(slos []SLO, os []obs, stat string, shape twin, pr Prior) *fitted {
	ttft := ttftPart(os, pr)
	itl := itlPart(prefillShares(os, ttft, shape.input), pr, ttft.prefill())
	shape.inSteps = decoders(&ttft, itl)
	if itl.ok && !(itl.fit.beta[0] > 0) {
		// A decode step at a batch of one at or below zero: the line
		// holds only over the batches its data decoded in (twin.least).
		shape.least = itl.least
	}
	if stat != "mean" && stat != "" {
		// A percentile is the mean's law shifted by the residuals' own
		// percentile: the noise around the law, not the law, sets it.
		for _, p := range []*part{&ttft, &itl} {
			if p.ok {
				p.fit.beta = slices.Clone(p.fit.beta)
				p.fit.beta[0] += Statistic(p.fit.resid, stat)
			}
		}
	}
	f := &fitted{laws: shape.with(ttft.fit.beta, itl.fit.beta), slos: slices.Clone(slos), capacity: math.NaN(), sloped: true,
		aim: math.Inf(1), reach: math.Inf(1)}
	standardErrors(f.ttftSE[:], ttft.fit, ttft.ok)
	standardErrors(f.itlSE[:], itl.fit, itl.ok)
	base := &cells{tw: f.laws}
	type sloFit struct {
		est, lo, hi, raw    float64
		placed, decodeShort bool
	}
	fits := make([]sloFit, len(slos))
	binding := -1
	var whys []string
	f.lower, f.upper = math.Inf(1), math.Inf(1)
	placedUpper := math.Inf(1) // the least upper bound of the thresholds placed
	// The optimistic bound takes a bend no further than the data measured
	// it: latency grows at least linearly with the batch (a step reads
	// every sequence), but how much more steeply past the data no probe
	// has said, so past the batches it was measured at the bend goes on as
	// its tangent there, also where δa's requests at arrival reach further.
	optimistic := shape
	if len(itl.fit.used) > curved && itl.fit.used[curved] { // no ITL fit at all: no bend
		optimistic.straight = math.Max(itl.batches-1, 1)
	}
	// Nor does it take a step's levelling (δe·ln b) further than the
	// batches it was measured at: a mixture of experts reads at most all
	// of its experts, E·(1 − (1 − k/E)^b) of them for a batch of b, and
	// past the batches measured they may all be read already, where ln b
	// goes on rising. moe-decode/3's document (64 experts, 8 a token,
	// nearly all read by 16 sequences) read 23.1 [20.8, 26.2] on an idle
	// server against 46.6.
	if len(itl.fit.used) > experts && itl.fit.used[experts] {
		optimistic.level = math.Max(itl.batches, 1)
		// Past them the experts may all be read already, and a step
		// grows by each sequence's own reads alone: at least as the use
		// case that measured the levelling furthest says (levelled).
		if p := pr.Past; p.Batches > itl.batches && p.Value < itl.fit.beta[1] {
			optimistic.past = p.Value
		}
	}
	slower, quicker := itl.fit, itl.fit
	if itl.ok {
		slower, quicker = jointly(itl.fit, 1, Reach*itl.reach), jointly(itl.fit, -1, Reach*itl.reach)
	}
	for i := range f.slos {
		s := &f.slos[i]
		s.Capacity, s.Lower, s.Upper = math.NaN(), math.NaN(), math.NaN()
		parts := []part{itl}
		switch s.Name {
		case "ttft_seconds":
			parts = []part{ttft}
		case "e2e_seconds":
			parts = []part{ttft, itl}
		}
		reach := math.Inf(1)
		sloped := true
		for _, p := range parts {
			reach = math.Min(reach, p.reach)
			sloped = sloped && p.slope()
		}
		short := sloShort(s.Name)
		if !sloped {
			whys = append(whys, short+": no requests sent together at two levels yet")
			f.sloped = false
			// Bursts were sent, but their probes never decoded together.
			f.decodeShort = f.decodeShort || s.Name != "ttft_seconds" && ttft.slope() && !itl.slope()
			continue
		}
		// The search goes as far as the data place a threshold, and the
		// bounds' horizon times further: past that, nothing bounds it.
		far := int(math.Ceil(Reach * reach))
		sf := sloFit{est: base.limit(*s, far)}
		sf.placed = sf.est <= Reach*reach
		at := math.Min(sf.est, float64(far))
		lo := shifted(shape, ttft.fit, slower, 1, 1).limit(*s, horizon*far)
		if itl.wide != nil && s.Name != "ttft_seconds" {
			lo = math.Min(lo, shifted(shape, ttft.fit, *itl.wide, 1, 1).limit(*s, horizon*far))
		}
		hi := shifted(optimistic, ttft.fit, quicker, -1, -1).limit(*s, horizon*far)
		// A closed loop is not monotone in every cost: a quicker decode
		// brings the second round back while the first still queues for
		// prefill, so a slower decode beside a quicker prefill can be the
		// band's best case. The bounds are the extremes of the estimate
		// and the four corners where each law is at one edge, and at least
		// the whole requests around the estimate: the protocol sends a
		// whole number, and the fraction between two levels is the
		// search's interpolation, which no latency measures (a law need
		// not be straight between them), so a band narrower than that
		// step would claim what nothing measured.
		quickPrefill := shifted(shape, ttft.fit, slower, -1, 1).limit(*s, horizon*far)
		quickDecode := shifted(optimistic, ttft.fit, quicker, 1, -1).limit(*s, horizon*far)
		sf.lo = min(lo, hi, quickPrefill, quickDecode, math.Floor(sf.est))
		sf.hi = max(lo, hi, quickPrefill, quickDecode, math.Ceil(sf.est))
		if sf.hi > float64(horizon*far) {
			sf.hi = math.Inf(1)
		}
		f.aim = math.Min(f.aim, sf.est)
		f.reach = math.Min(f.reach, reach)
		sf.raw = sf.est
		if !sf.placed {
			sf.est = math.NaN()
			sf.lo = math.Min(sf.lo, Reach*reach)
			sf.decodeShort = s.Name != "ttft_seconds" && itl.reach < ttft.reach
			whys = append(whys, fmt.Sprintf("%s threshold not reached; requests together up to %.0f", short, reach))
		}
		fits[i] = sf
		s.Capacity, s.Lower, s.Upper = sf.est, sf.lo, sf.hi
		if sf.placed {
			placedUpper = math.Min(placedUpper, sf.hi)
		} else {
			// Past the data's reach the laws are not trusted to place the
			// threshold, so nothing they say there bounds it from above
			// either: moe-decode/3's short chatbot under load, its requests
			// together up to 30, read at least 56.4 with the optimistic
			// laws' crossing, 64.1, for an upper bound, against a truth of
			// 109.5. (A placed capacity's upper still takes it, as the
			// least a threshold's band allows.)
			s.Upper = math.Inf(1)
		}
		s.Curve = curve(base, s.Name, math.Max(2*reach, math.Min(at*1.2, 4*reach)))
		f.lower, f.upper = math.Min(f.lower, sf.lo), math.Min(f.upper, sf.hi)
		// The binding threshold is the one whose law crosses first, placed
		// or not: a law the data do not reach yet still says, by its line,
		// that it breaks after one they do.
		if binding < 0 || sf.raw < fits[binding].raw {
			binding = i
		}
	}
	f.why = strings.Join(whys, "; ")
	switch {
	case !f.sloped || binding < 0:
	case !fits[binding].placed:
		// The first crossing lies past the data's reach: a bound.
		f.bound, f.decodeShort, f.upper = true, fits[binding].decodeShort, placedUpper
		f.why = fmt.Sprintf("at least %.1f: %s", f.lower, f.why)
	case math.IsInf(f.upper, 1):
		// The band reaches to no bound at all: the data place no
		// threshold, wherever the laws' line crosses (a law of one or two
		// observations, sloped by the other use cases' prior and noise).
		f.bound = true
		f.why = fmt.Sprintf("at least %.1f: the laws' bands place no threshold (up to no bound)", f.lower)
	default:
		f.capacity, f.why = fits[binding].est, ""
	}
	return f
}

// apply puts a fit into e with the production now.
func (f *fitted) apply(e *Estimate, now Production) {
	f.place(e)
	if f.reads(now) {
		f.read(e, now)
	}
}

// reads says whether the production now moves what the fit puts into an
// estimate: the margins, the free requests and the ratio of a placed
// capacity.
func (f *fitted) reads(now Production) bool {
	return f.sloped && !f.bound && !math.IsNaN(now.InFlight)
}

// place puts into e what the fit says whatever the production.
func (f *fitted) place(e *Estimate) {
	for i := range e.SLOs {
		s, g := &e.SLOs[i], f.slos[i]
		s.Capacity, s.Lower, s.Upper, s.Curve = g.Capacity, g.Lower, g.Upper, g.Curve
	}
	e.Why = f.why
	if f.sloped {
		e.Aim, e.Reach = f.aim, f.reach
	}
	switch {
	case !f.sloped:
		// A law the data cannot slope yet: all that is known is whether
		// one request alone meets every threshold.
		e.Bound, e.Lower, e.Upper = "lower", e.alone(), math.Inf(1)
		if math.IsNaN(e.Lower) {
			e.Bound = ""
		}
		return
	case f.bound:
		e.Bound, e.Lower, e.Upper = "lower", f.lower, f.upper
		return
	}
	e.Capacity, e.Lower, e.Upper = f.capacity, f.lower, f.upper
}

// read puts into e what the fit says with the production now in it (reads).
func (f *fitted) read(e *Estimate, now Production) {
	// The margin, the free requests and the ratio are one reading of the
	// same twin with the production now in it, so that they never
	// disagree: the margin is what one more request would meet, free how
	// many more fit.
	r := f.at(now, e.SLOs)
	free := r.free
	e.Margin = math.Inf(1)
	for i := range e.SLOs {
		e.SLOs[i].Margin = r.margins[i]
		e.Margin = math.Min(e.Margin, r.margins[i])
	}
	if e.Margin < 0 || free < 1 {
		free = 0
	}
	e.Free = math.Min(free, e.Capacity)
	e.Ratio = 0
	if e.Capacity > 0 {
		e.Ratio = e.Free / e.Capacity
	}
}

// reading is what the twin says at one load: each SLO's margin for one
// more request, and how many more fit.
type reading struct {
	margins []float64
	free    float64
}

// keyedReading is a reading and the load it was read at (fitted.at's key);
// margins nil: none yet.
type keyedReading struct {
	key [3]float64
	reading
}

// at reads the twin with the production now, to a quarter of a request
// (the engine's own readings are means over a scrape) and a thousand KV
// tokens, keeping the last few readings: the daemon asks at every scrape,
// page and calibration decision.
func (f *fitted) at(now Production, slos []SLO) reading {
	w := 0.0
	if now.Waiting > 0 {
		w = math.Round(now.Waiting*4) / 4
	}
	running := math.Max(math.Round(now.InFlight*4)/4-w, 0)
	beyond := 0.0
	if now.KV > 0 {
		beyond = math.Round(now.KV/1000 - running*f.laws.held/1000)
	}
	key := [3]float64{running, w, beyond}
	f.mu.Lock()
	for _, k := range f.readings {
		if k.margins != nil && k.key == key {
			f.mu.Unlock()
			return k.reading
		}
	}
	f.mu.Unlock()
	tw := f.laws
	tw.running, tw.waiting, tw.beyond = running, w, beyond
	cs := &cells{tw: tw}
	one := cs.at(1)
	r := reading{margins: make([]float64, 0, len(slos)), free: math.Inf(1)}
	for _, s := range slos {
		r.margins = append(r.margins, margin(s.Name, one.value(s.Name), s.Threshold))
		r.free = math.Min(r.free, cs.limit(s, int(math.Ceil(f.capacity))+1))
	}
	f.mu.Lock()
	f.readings[f.next] = keyedReading{key: key, reading: r}
	f.next = (f.next + 1) % readings
	f.mu.Unlock()
	return r
}

// readings is how many loads' readings a fit keeps: the daemon's asks
// between two of production's readings share one load, and a load that
// wanders keeps few in common with the last minutes'. A map of 64 per
// fit held about 9 KB more under a load that wandered
// (BenchmarkMemoRetained): 45 MB for a fleet of 5,000 use cases, to save
// a twin's run per scrape.
const readings = 4

// shifted is the twin with every coefficient of each law at one edge of
// its 95% band (the law's own quantile of Student's t times its standard
// error, as its scale is estimated from its few observations): side +1 the
// pessimistic edge (every cost higher), -1 the optimistic; TTFT's law at
// prefill's side, ITL's at decode's. Each coefficient at its own band's edge
// together covers at least the laws' joint band at every load; fit reads
// the four corners, as a closed loop is not monotone in every cost. No
// coefficient is known to better than the latencies it is fitted from
// (resolution): where hundreds of probes make a standard error smaller,
// a band of a fraction of a percent would claim what no probe measures.
func shifted(shape twin, ttft, itl linearFit, prefill, decode float64) *cells {
	return &cells{tw: shape.with(shift(ttft, prefill), shift(itl, decode))}
}

// jointly moves the ITL law's slope δb and its ln b term δe together to
// the edge of their joint 95% band where a step at batch b is slowest
// (side 1) or quickest (−1), and holds them there for shift: the two
// columns rise together with the batch, so their estimates trade against
// each other, and each at the edge of its own band (shift's corners) is
// a step the data exclude (report 000's chatbot on an idle simulator:
// bounds of 2.6 and 74.0 around 7.0). At b, the far end of what the law
// is trusted to (Reach times its data), the band is widest. For a
// prediction r·β the edge is β ± t·Σr/√(rᵀΣr).
func jointly(f linearFit, side, b float64) linearFit {
	if !f.used[1] || !f.used[experts] || !(b > 1) {
		return f
	}
	r := [2]float64{b - 1, math.Log(b)}
	c := [2][2]float64{{f.cov[1][1], f.cov[1][experts]}, {f.cov[experts][1], f.cov[experts][experts]}}
	sr := [2]float64{c[0][0]*r[0] + c[0][1]*r[1], c[1][0]*r[0] + c[1][1]*r[1]}
	v := r[0]*sr[0] + r[1]*sr[1]
	if !(v > 0) || math.IsInf(v, 0) {
		return f
	}
	k := side * f.quantile() / math.Sqrt(v)
	out := f
	out.beta = slices.Clone(f.beta)
	out.cov = make([][]float64, len(f.cov))
	for i, row := range f.cov {
		out.cov[i] = slices.Clone(row)
	}
	for j, col := range [2]int{1, experts} {
		out.beta[col] += k * sr[j]
		for i := range out.cov {
			out.cov[i][col], out.cov[col][i] = 0, 0
		}
	}
	return out
}

func shift(f linearFit, side float64) []float64 {
	out := slices.Clone(f.beta)
	for a := range out {
		if !f.used[a] {
			continue
		}
		if se := math.Max(math.Sqrt(math.Max(f.cov[a][a], 0)), resolution*math.Abs(out[a])); se > 0 {
			out[a] += side * f.quantile() * se
		}
		if a > 0 || math.IsNaN(out[a]) {
			out[a] = math.Max(out[a], 0)
		}
	}
	return out
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

// curve samples the twin for one SLO at n = 1 to upTo, for the status
// page's chart.
func curve(cs *cells, name string, upTo float64) Curve {
	top := int(math.Min(math.Max(math.Ceil(upTo), 2), 4096))
	c := make(Curve, 0, 9) // kept with the fit: no room to grow into
	last := 0
	for i := range 9 {
		n := 1 + (top-1)*i/8
		if n == last {
			continue
		}
		last = n
		c = append(c, Knot{Load: float64(n), Value: cs.at(n).value(name)})
	}
	return c
}
