package capacity

import (
	"math"
	"sync"
)

// rounds is how many requests each slot of the reports' closed loop serves
// (sim.Rounds, which cannot be imported here: sim builds on capacity). All
// slots start together and every round counts: the first round is a burst,
// the second arrives as the first ends, staggered by its decode.
const rounds = 2

// twin runs the fitted laws as the reports measure "N concurrent requests":
// n requests of the use case's shape (output tokens each) start together,
// each is replaced as it ends, rounds requests per slot, and the means are
// taken over every request. Each request's TTFT is set on arrival by the
// TTFT law from the prefills queued ahead of it, those behind it and the
// sequences decoding, and lengthened by the prompts that come while it
// waits; its tokens' pace, event by event (closed), by the ITL
// law from the batch decoding at each moment and the requests it arrived
// into, slower while other prompts wait for prefill. The production in
// flight now (running, waiting) stays in flight throughout: with it, the
// twin says how many more fit on top of it (free requests); without, the
// capacity.
type twin struct {
	ttft, itl        []float64 // the laws' coefficients (part's columns)
	output           float64
	running, waiting float64
	// kv > 0: the KV cache's tokens, of which kvBusy production holds. A
	// request holds input+output tokens from its admission to its end, and
	// is admitted first come first served while it fits (vLLM reserves as
	// it decodes, so this errs on the early side); the rest wait.
	kv, kvBusy, input float64
	// beyond is the laws' k while production runs: the KV tokens, in
	// thousands, its running requests hold beyond as many of the shape,
	// each of which holds held (UseCase.held).
	beyond, held float64
	// straight > 0: past that many others in its batch, the bend goes on
	// as its tangent there (the optimistic bound's law, and the estimate's
	// where the bend is lent: fit).
	straight float64
	// level > 1: past a batch of level, the step's ln b term holds its
	// value there (the optimistic bound's law, fit).
	level float64
	// past > 0: past a batch of level, each further sequence adds at most
	// past to a step (the optimistic bound's law, fit).
	past float64
	// tangent > 1: past a batch of tangent, the step's levelling term goes
	// on as its tangent there (the pessimistic bound's law, fit).
	tangent float64
	// saturate is the shape of the step's levelling (levelColumn; 0: ln b).
	saturate float64
	// least > 1: the smallest batch the ITL law's data decoded in, where
	// its line falls to zero or below at a batch of one (fit). Below it
	// the step holds its value there: a line fitted where production never
	// left the server idle, to batches of 6 to 17, says nothing of a step
	// at 1 (itl-during-decode/5304 under load: δ0 −4.5 ms beside steps of
	// 18 and 131 ms measured, a request decoding alone at 10⁹ tokens/s),
	// and a step never shortens as its batch grows, so the step at the
	// least batch bounds every smaller one's from above. A line above zero
	// at one is the law's own word there, and is kept: held at the least
	// batch, production's 6 decoding had placed code completion's capacity
	// of 3 at 0 (itl-at-arrival/5304 under load).
	least float64
	// inSteps: the engine prefills in steps that also decode (decoders),
	// so that every decoding sequence lengthens every prefill, a prompt's
	// own and each one's ahead of it: a prompt's wait stretches with the
	// decode batch (closed).
	inSteps bool
	// lag is the part of a request's TTFT before its prompt reaches the
	// engine (an API server's overhead, tokenizing): the TTFT law's fixed
	// part (Prior's), 0 where the use cases do not show one. A prompt stalls
	// the decodes running from then, not from its arrival: on report 002's
	// simulator a closed loop's first round of 64K documents ended within
	// 60 ms, before the 70 ms the first replacement took to reach the
	// engine, and its second round arrived as a wave; stalled at arrival,
	// the twin's decodes ended a prefill apart and its second round arrived
	// spread out, waiting a third as long.
	lag float64
}

// with is the twin of these laws' coefficients.
func (tw twin) with(ttft, itl []float64) twin {
	tw.ttft, tw.itl = ttft, itl
	if tw.ttft == nil {
		tw.ttft = make([]float64, ttftKV+1)
	}
	if tw.itl == nil {
		tw.itl = make([]float64, itlCols)
	}
	return tw
}

// cell is what the twin measures at one n: means over its requests.
type cell struct{ ttft, itl, e2e, decode float64 }

type twinReq struct {
	slot, round        int
	arrive, first, end float64
	inFlight           float64 // the requests in flight it arrived into, itself included (the ITL law's a)
}

// arrivals is a min-heap of the requests to come, earliest first (ties by
// slot: no two are of one slot), kept by hand rather than by container/heap,
// whose Push and Pop box each request: the twin is most of an estimate's
// allocations. Every slot differs, so the order requests leave it in is
// the same whatever the heap's layout.
type arrivals []twinReq

func (a arrivals) less(i, j int) bool {
	return a[i].arrive < a[j].arrive || a[i].arrive == a[j].arrive && a[i].slot < a[j].slot
}

func (a *arrivals) push(r twinReq) {
	*a = append(*a, r)
	h := *a
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h.less(i, up) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
}

func (a *arrivals) pop() twinReq {
	h := *a
	n := len(h) - 1
	h[0], h[n] = h[n], h[0]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*a = h[:n]
	return h[n]
}

// scratch is the twin's working memory, reused from one n to the next,
// and from one cells to the next through scratches.
type scratch struct {
	pending      arrivals
	active, done []twinReq
	left, rate   []float64 // by place in active: tokens still to decode, and their pace now
}

// scratches are the twins' working memories between runs of closed: a
// fit searches a dozen twins (each SLO's bounds and edges, the readings at
// new loads), and each made its own, most of what the fleet's fits
// allocated.
var scratches = sync.Pool{New: func() any { return new(scratch) }}

// closed is the closed loop of n slots, event by event: an arrival has its
// TTFT from the law at that moment; between events every decoding request
// has its tokens at the pace the ITL law gives its step at the batch
// decoding then, every D, or D+δp while some prompt waits for its first
// token (or for the share of the time production's waiting queue stands,
// where none of the loop's does). A prompt stalls every decode already
// running once it reaches the engine (lag after its arrival), so a closed
// loop whose requests end further apart than that cascades: the first
// end's replacement prefills while the rest have a few tokens left, each of
// them ending a prefill later (the simulator's report 002 chatbot at 17,
// round 2's TTFT 5.3 s against round 1's 10.8); one whose requests end
// within it sends its second round as a wave, as does an engine that
// prefills the waiting prompts together. A fixed point over whole passes
// (each decode's end from the prefills the pass before placed) did not
// settle on either: it swung between a wave and a stagger from one pass
// to the next.
func (tw twin) closed(n int, sc *scratch) cell {
	var c cell
	if n < 1 {
		return c
	}
	if c, ok := tw.unbounded(); ok {
		return c
	}
	pending := sc.pending[:0]
	for i := range n {
		pending = append(pending, twinReq{slot: i}) // in order: a heap already
	}
	active, done := sc.active[:0], sc.done[:0]
	left, rate := sc.left[:0], sc.rate[:0]
	need := tw.input + tw.output
	kvBound := tw.kv > 0 && need+tw.kvBusy <= tw.kv
	w := math.Min(math.Max(tw.waiting, 0), 1)
	p := math.Max(tw.itl[prefilling], 0)
	kT := kvBeyond(tw.beyond, tw.running, tw.held, tw.ttft[decoding], tw.ttft[ttftKV])
	kI := kvBeyond(tw.beyond, tw.running, tw.held, tw.itl[1], tw.itl[itlKV])
	// What the TTFT law says of prefill shared between waiting prompts,
	// read once: the share of a prompt's prefill that those beside it
	// share (τw/τq), and how much longer one waits for a prompt that comes
	// beside it than for the decoding request it had counted (τw − τd).
	shared, late := 0.0, tw.ttft[queued]-tw.ttft[decoding]
	// queue is the share of the law that is a first-come-first-served
	// queue, where a prompt's first token comes its own lone wait after
	// the first token of the last prompt ahead of it: one that charges
	// neither a decoder (τd) nor a prompt beside it (τw) what it charges a
	// prompt ahead (τq). The prompt at the queue's head has begun, and
	// costs what it has left, not its whole prefill: charged whole, a
	// closed loop's second round, which comes as the first's ends a
	// prefill apart, queued a prefill behind each (report 004's document,
	// 6.78 s against the simulator's 3.30 at 16; the chunked law's 32K
	// chatbot, 2.38 against 0.97 at 8). A law that charges every request
	// in flight alike (τd = τq) is no such queue, and keeps the whole
	// charge.
	queue := 0.0
	if tw.ttft[1] > 0 {
		shared = math.Min(math.Max(tw.ttft[queued]/tw.ttft[1], 0), 1)
		queue = (1 - shared) * (1 - math.Min(math.Max(tw.ttft[decoding]/tw.ttft[1], 0), 1))
	}
	// per is what one prompt's prefill costs at a decode batch: τq, and
	// where the engine prefills in steps that decode, τd more for each
	// sequence decoding (the law's τd is that for its own prefill).
	stretch := tw.inSteps && tw.ttft[1] > 0
	per := func(batch float64) float64 {
		if stretch {
			return tw.ttft[1] + tw.ttft[decoding]*batch
		}
		return tw.ttft[1]
	}
	now, lastBatch := 0.0, tw.running
	for len(pending) > 0 || len(active) > 0 {
		// The decoding requests' pace now, and the next event: an
		// arrival that fits, a first token, or an end.
		decodes, waiting := 0, false
		for _, o := range active {
			switch {
			case o.first <= now:
				decodes++
			case now >= o.arrive+tw.lag:
				waiting = true
			}
		}
		if b := float64(decodes) + tw.running; stretch && b != lastBatch {
			// The prefills still to come before a waiting prompt's first
			// token run at the new batch's pace.
			k := per(b) / per(lastBatch)
			for i := range active {
				if o := &active[i]; o.first > now {
					o.first = now + (o.first-now)*k
				}
			}
			lastBatch = b
		}
		next := math.Inf(1)
		if len(pending) > 0 && !(kvBound && tw.kvBusy+need*float64(1+len(active)) > tw.kv) {
			next = pending[0].arrive
		}
		batch := float64(decodes) + tw.running
		// The step at this batch, less the arrivals' term, which is each
		// request's own: δa per request in flight it arrived into beyond
		// the batch.
		b := math.Max(batch, tw.least)
		row := itlRow(b, b, 0, tw.bend(b-1), kI, tw.saturate)
		if tw.level > 1 && b > tw.level {
			row[experts] = levelColumn(tw.level, tw.saturate)
			if d := tw.itl[1]; tw.past > 0 && d > tw.past {
				row[1] = tw.level - 1 + (b-tw.level)*tw.past/d
			}
		}
		if tw.tangent > 1 && b > tw.tangent {
			row[experts] = levelColumn(tw.tangent, tw.saturate) + (b-tw.tangent)*levelSlope(tw.tangent, tw.saturate)
		}
		step, arrivals := decodeStep(tw.itl, row[:]), tw.itl[2]
		for i, o := range active {
			if o.first > now {
				next = math.Min(next, o.first)
				if reach := o.arrive + tw.lag; reach > now {
					next = math.Min(next, reach) // it stalls the decodes from then
				}
				continue
			}
			d := step
			if o.inFlight > batch {
				d += arrivals * (o.inFlight - batch)
			}
			if d < 1e-9 {
				d = 1e-9
			}
			r := 1 / d
			switch {
			case waiting:
				r = 1 / (d + p)
			case w > 0:
				r = w/(d+p) + (1-w)/d
			}
			rate[i] = r
			if e := now + left[i]/r; e < next {
				next = e
			}
		}
		if math.IsInf(next, 1) {
			break // nothing can happen: a request that never fits
		}
		next = math.Max(next, now)
		for i, o := range active {
			switch {
			case o.first > now:
			case now+left[i]/rate[i] <= next:
				left[i] = 0 // exactly: the event that ends it, whatever the rounding
			default:
				left[i] -= rate[i] * (next - now)
			}
		}
		now = next
		// Ends first: their slots' next requests arrive now.
		kept := 0
		for i, o := range active {
			if o.first <= now && left[i] <= 0 {
				o.end = now
				itl := 0.0
				if tw.output > 1 {
					itl = (o.end - o.first) / (tw.output - 1)
				}
				c.ttft += o.first - o.arrive
				c.itl += itl
				c.e2e += o.end - o.arrive
				if itl > 0 {
					c.decode += 1 / itl
				}
				done = append(done, o)
				if o.round+1 < rounds {
					pending.push(twinReq{slot: o.slot, round: o.round + 1, arrive: o.end})
				}
				continue
			}
			active[kept], left[kept] = o, left[i]
			kept++
		}
		active, left, rate = active[:kept], left[:kept], rate[:kept]
		for len(pending) > 0 && pending[0].arrive <= now {
			if kvBound && tw.kvBusy+need*float64(1+len(active)) > tw.kv {
				break // it waits for KV cache: the next end frees some
			}
			r := pending.pop()
			// A prompt ahead of it costs it τq, its whole prefill, where
			// the engine prefills first come first served (τw near zero):
			// it has not begun. Where the engine prefills its waiting
			// prompts together (τw near τq), one that came earlier has done
			// some of its work meanwhile and costs what it has left to its
			// first token, but no less than the sequence decoding it is
			// about to be (τd): a loop's second round comes while the
			// first's last prompts finish, and charging each its whole
			// prefill charged the engine's work twice. Between the two, by
			// the share τw/τq (shared).
			running := 0.0
			for _, o := range active {
				if o.first <= now {
					running++
				}
			}
			q1 := per(running + tw.running)
			ahead, before, earlier, last := 0.0, 0.0, 0.0, now
			for _, o := range active {
				switch {
				case o.first <= now:
				case o.arrive < r.arrive:
					ahead++
					rest := math.Max(math.Min(q1, o.first-now), tw.ttft[decoding])
					charge := q1 - shared*(q1-rest)
					before += charge
					earlier += charge
					last = math.Max(last, o.first)
				default:
					ahead++
					before += q1
				}
			}
			// Those that arrived behind it (at the same instant, or queued
			// for KV cache since) are in flight beside it, not ahead of it.
			behind := 0.0
			for _, o := range pending {
				if o.arrive <= now {
					behind++
				}
			}
			ttft := tw.ttft[0] + before + q1*tw.waiting + tw.ttft[queued]*behind + tw.ttft[decoding]*(running+tw.running) + tw.ttft[ttftKV]*kT
			if head := ttft - earlier + (last - now); queue > 0 && earlier > 0 && head < ttft {
				ttft -= queue * (ttft - head)
			}
			r.first = now + math.Max(ttft, 0)
			// It waits beside the prompts that came before it and still
			// wait, each of which counted its slot's request then as
			// decoding (τd), not as a prompt beside it (τw; those that came
			// at the same instant, or were queued for KV cache, it counted
			// behind it already). Each waits up to the difference longer:
			// an engine that prefills its m waiting prompts together delays
			// each by at most what it had left of its own work, about its
			// time to its first token over m. Counted at arrival alone, a
			// loop's second round, staggered by a few milliseconds, lost
			// the wave such an engine keeps: on the simulator's SGLang
			// profile the twin's short chatbot took 0.21 s a request where
			// the engine takes 0.27. An engine that charges a decoding
			// sequence as a waiting prompt, or prefills first come first
			// served (τw near zero), is unchanged.
			if m := ahead + tw.waiting; late > 0 && m > 0 {
				for i := range active {
					if o := &active[i]; o.first > now && o.arrive < r.arrive {
						o.first += math.Min(late, (o.first-now)/m)
					}
				}
			}
			r.inFlight = 1 + ahead + running + behind + tw.running + tw.waiting
			active, left, rate = append(active, r), append(left, math.Max(tw.output-1, 0)), append(rate, 0)
		}
	}
	sc.pending, sc.active, sc.done, sc.left, sc.rate = pending, active, done, left, rate
	count := float64(len(done))
	if count == 0 {
		return cell{ttft: math.Inf(1), itl: math.Inf(1), e2e: math.Inf(1)}
	}
	c.ttft, c.itl, c.e2e, c.decode = c.ttft/count, c.itl/count, c.e2e/count, c.decode/count
	return c
}

// kvBeyond is the k a law charges production's running requests by: the
// KV tokens, in thousands, they hold beyond as many of the shape's
// (beyond), but no less than makes each cost at least its own tokens at
// the law's slope per token (perK: τk, δk). The law charges a sequence of
// the shape's perSeq (τd, δb): a part every sequence pays, whatever its
// length, and its held tokens at perK. A fit can put that part below zero
// (τd held at zero beside a τk above it), and then each of production's
// short requests would make a prompt or a step quicker than none at all;
// physics has it cost at least nothing more than its tokens.
func kvBeyond(beyond, running, held, perSeq, perK float64) float64 {
	if !(perK > 0) || !(running > 0) {
		return beyond
	}
	if part := perSeq - perK*held/1000; part < 0 {
		return beyond - part*running/perK
	}
	return beyond
}

// unbounded is the cell of a law with a coefficient that is not finite: a
// band's corner whose fit had under one degree of freedom, where Student's
// t is infinite (linearFit.quantile), slower or quicker without bound. No
// run event by event can take it: ∞·0 is NaN, and a request whose first
// token comes at NaN never ends (a fit of kv-cliff/2202 under load, τd at
// +∞ beside an ITL intercept at −∞, spun here for 51 minutes at n = 1). A
// law slower without bound anywhere, or not a number, breaks every
// threshold; one only quicker without bound (an intercept at −∞, its
// slopes held at zero by shift) meets every one. A band takes its extremes
// over its corners, so it reads from 0 to no bound either way.
func (tw twin) unbounded() (cell, bool) {
	quicker := false
	for _, law := range [][]float64{tw.ttft, tw.itl} {
		for _, v := range law {
			switch {
			case math.IsNaN(v) || math.IsInf(v, 1):
				return cell{ttft: math.Inf(1), itl: math.Inf(1), e2e: math.Inf(1)}, true
			case math.IsInf(v, -1):
				quicker = true
			}
		}
	}
	if quicker {
		return cell{decode: math.Inf(1)}, true
	}
	return cell{}, false
}

// bend is the ITL law's (b−1)² at x = b−1, or past straight its tangent
// there.
func (tw twin) bend(x float64) float64 {
	if r := tw.straight; r > 0 && x > r {
		return r * (2*x - r)
	}
	return x * x
}

// value is a cell's figure for one SLO.
func (c cell) value(name string) float64 {
	switch name {
	case "ttft_seconds":
		return c.ttft
	case "e2e_seconds":
		return c.e2e
	case "itl_seconds":
		return c.itl
	}
	return c.decode
}

// margin is a figure's relative distance to its threshold (< 0: breached).
func margin(name string, v, threshold float64) float64 {
	if name == "decode_tokens_per_second" {
		return (v - threshold) / threshold
	}
	return (threshold - v) / threshold
}

// cells memoizes a twin's cells: each SLO's search asks for the same n.
// It is used by one goroutine at a time.
type cells struct {
	tw   twin
	seen map[int]cell
}

func (cs *cells) at(n int) cell {
	if c, ok := cs.seen[n]; ok {
		return c
	}
	if cs.seen == nil {
		cs.seen = map[int]cell{}
	}
	sc := scratches.Get().(*scratch)
	c := cs.tw.closed(n, sc)
	scratches.Put(sc)
	cs.seen[n] = c
	return c
}

// limit is the largest n up to maxN at which the SLO holds in the twin,
// interpolated between levels as a benchmark's search is (Search); maxN+1
// when it holds up to maxN.
func (cs *cells) limit(s SLO, maxN int) float64 {
	l, capped, _ := Search(maxN, func(n int) (float64, error) {
		return margin(s.Name, cs.at(n).value(s.Name), s.Threshold), nil
	})
	if capped {
		return float64(maxN + 1)
	}
	return l
}
