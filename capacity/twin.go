package capacity

import (
	"cmp"
	"math"
	"slices"
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
// sequences decoding; its decode step, at its first token, by the ITL law
// from the batch it decodes in and the requests it arrived into, and its
// end by its tokens' pace, slower while other prompts wait for prefill
// (decodeEnd). The production in flight now (running,
// waiting) stays in flight throughout: with it, the twin says how many more
// fit on top of it (free requests); without, the capacity.
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
	// as its tangent there (the optimistic bound's law, fit).
	straight float64
}

// with is the twin of these laws' coefficients.
func (tw twin) with(ttft, itl []float64) twin {
	tw.ttft, tw.itl = ttft, itl
	if tw.ttft == nil {
		tw.ttft = make([]float64, ttftKV+1)
	}
	if tw.itl == nil {
		tw.itl = make([]float64, itlKV+1)
	}
	return tw
}

// cell is what the twin measures at one n: means over its requests.
type cell struct{ ttft, itl, e2e, decode float64 }

type twinReq struct {
	slot, round               int
	arrive, admit, first, end float64
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

// scratch is the twin's working memory, reused from one pass and one n to
// the next by a cells (one search at a time).
type scratch struct {
	pending      arrivals
	active, done []twinReq
	order        []twinReq // done by admission (prefillSpans)
	edges        []edge
	ts, fs       []float64
	from, to     []float64 // prefillSpans' spans
	batches      []float64 // by slot and round (at): each decode's mean batch, as besides measured
	prefills     spans     // when prompts waited for prefill in the pass before
}

func (sc *scratch) at(slot, round int) *float64 { return &sc.batches[slot*rounds+round] }

func (tw twin) closed(n int, sc *scratch) cell {
	if n < 1 {
		return cell{}
	}
	// Each request's decode batch is the time it shares with others'
	// decodes, and its tokens' pace the times other prompts wait for
	// prefill, both of which depend on when the others start and end: a
	// few passes, each with what the one before measured, settle them.
	var c cell
	measured := false
	for range twinPasses {
		c = tw.run(n, sc, measured)
		besides(sc, tw.running)
		sc.prefills = prefillSpans(sc)
		measured = true
	}
	return c
}

// besides is the batch each request decoded in (into sc.batches, from
// sc.done). Its batch: itself,
// production's running requests and, for each other request, the share of
// its decode it decoded beside it. With D(t) the requests decoding at t and
// F its integral, a request decoding from a to b shares F(b) - F(a) - (b -
// a) request-seconds with the others: one sweep over the sorted starts and
// ends, not a comparison of every pair.
func besides(sc *scratch, running float64) {
	done := sc.done
	edges := sc.edges[:0]
	for _, r := range done {
		edges = append(edges, edge{r.first, 1}, edge{r.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.t, b.t) })
	ts := slices.Grow(sc.ts[:0], len(edges))[:len(edges)]
	fs := slices.Grow(sc.fs[:0], len(edges))[:len(edges)] // F at each edge's time
	sc.edges, sc.ts, sc.fs = edges, ts, fs
	decoding, f := 0, 0.0
	for i, e := range edges {
		if i > 0 {
			f += float64(decoding) * (e.t - edges[i-1].t)
		}
		ts[i], fs[i] = e.t, f
		decoding += e.d
	}
	at := func(t float64) float64 {
		i, _ := slices.BinarySearch(ts, t)
		return fs[min(i, len(fs)-1)]
	}
	sc.batches = slices.Grow(sc.batches[:0], len(done))[:len(done)]
	for _, r := range done {
		b := 1 + running
		if span := r.end - r.first; span > 0 {
			b += math.Max(0, at(r.end)-at(r.first)-span) / span
		}
		*sc.at(r.slot, r.round) = b
	}
}

// decodeEnd is when a request whose first token came at first has its
// other tokens, decoding a token every step d, and every p while some
// prompt waits for prefill: throughout the spans, and otherwise for the
// share of the time production's queue of waiting prompts stands (its mean:
// a queue of 0.3 stands at most 30% of the time). Its mean interval is the
// ITL law's harmonic mean at the share of its own decode the spans cover,
// solved with its end rather than guessed: a request that has its first
// token early in a wave decodes through the later prompts' prefill at p,
// and ends about when they do. A closed loop of an engine that prefills the
// waiting prompts together so stays in waves, each round a burst, as the
// reports measured.
func decodeEnd(first, tokens, d, p, waiting float64, prefills spans) float64 {
	w := math.Min(math.Max(waiting, 0), 1)
	in, out := 1/p, w/p+(1-w)/d // tokens a second
	t := first
	i, _ := slices.BinarySearch(prefills.to, t) // spans ending at or after first
	for ; i < len(prefills.to) && tokens > 0; i++ {
		if a := prefills.from[i]; a > t {
			if tokens <= out*(a-t) {
				return t + tokens/out
			}
			tokens -= out * (a - t)
			t = a
		}
		b := prefills.to[i]
		if tokens <= in*(b-t) {
			return t + tokens/in
		}
		tokens -= in * (b - t)
		t = b
	}
	return t + tokens/out
}

// edge is a request's start (d 1) or end (d -1) of decoding.
type edge struct {
	t float64
	d int
}

// spans is a union of disjoint time spans, in order: [from[i], to[i]].
type spans struct{ from, to []float64 }

// prefillSpans is when some request of sc.done was admitted and waiting
// for its first token.
func prefillSpans(sc *scratch) spans {
	sc.order = append(sc.order[:0], sc.done...)
	slices.SortFunc(sc.order, func(a, b twinReq) int { return cmp.Compare(a.admit, b.admit) })
	s := spans{from: sc.from[:0], to: sc.to[:0]}
	for _, r := range sc.order {
		if r.first <= r.admit {
			continue
		}
		if n := len(s.to); n > 0 && r.admit <= s.to[n-1] {
			s.to[n-1] = math.Max(s.to[n-1], r.first)
			continue
		}
		s.from, s.to = append(s.from, r.admit), append(s.to, r.first)
	}
	sc.from, sc.to = s.from, s.to
	return s
}

// twinPasses is how many passes closed makes. The first knows no prefill
// but production's; the second has the first round's prefills right (they
// are set on arrival) and so its ends; the third the second round's.
const twinPasses = 3

// run is one pass of the twin with n slots, into sc.done; measured: with
// the batches sc.batches and the prefills sc.prefills hold from the pass
// before.
func (tw twin) run(n int, sc *scratch, measured bool) cell {
	var c cell
	pending := sc.pending[:0]
	for i := range n {
		pending = append(pending, twinReq{slot: i}) // in order: a heap already
	}
	active, done := sc.active[:0], sc.done[:0]
	need := tw.input + tw.output
	admitted := 0.0 // when the last request was admitted: none overtakes it
	for len(pending) > 0 {
		r := pending.pop()
		t := math.Max(r.arrive, admitted)
		if tw.kv > 0 && need+tw.kvBusy <= tw.kv {
			// Wait until enough of the requests in flight have ended.
			for tw.kvBusy+need*(1+float64(holding(active, t))) > tw.kv {
				t = nextEnd(active, t)
			}
		}
		admitted, r.admit = t, t
		kept := active[:0]
		ahead, running := 0.0, 0.0
		for _, o := range active {
			if o.end <= t {
				continue
			}
			kept = append(kept, o)
			if o.first > t {
				ahead++
			} else {
				running++
			}
		}
		active = kept
		// Those that arrived behind it (at the same instant, or queued
		// for KV cache since) are in flight beside it, not ahead of it.
		behind := 0.0
		for _, o := range pending {
			if o.arrive <= t {
				behind++
			}
		}
		ttft := tw.ttft[0] + tw.ttft[1]*(ahead+tw.waiting) + tw.ttft[queued]*behind + tw.ttft[decoding]*(running+tw.running) + tw.ttft[ttftKV]*tw.beyond
		r.first = t + math.Max(ttft, 0)
		inFlight := 1 + ahead + running + behind + tw.running + tw.waiting
		// The first pass takes every request in flight on arrival to
		// decode beside it; the later ones measure it.
		batch, prefills := inFlight, spans{}
		if measured {
			batch, prefills = *sc.at(r.slot, r.round), sc.prefills
		}
		row := itlRow(batch, inFlight, 0, tw.bend(batch-1), tw.beyond)
		d := math.Max(decodeStep(tw.itl, row[:]), 1e-9)
		r.end = decodeEnd(r.first, tw.output-1, d, d+math.Max(tw.itl[prefilling], 0), tw.waiting, prefills)
		itl := d
		if tw.output > 1 {
			itl = (r.end - r.first) / (tw.output - 1)
		}
		active = append(active, r)
		done = append(done, r)
		c.ttft += r.first - r.arrive
		c.itl += itl
		c.e2e += r.end - r.arrive
		c.decode += 1 / itl
		if r.round+1 < rounds {
			pending.push(twinReq{slot: r.slot, round: r.round + 1, arrive: r.end})
		}
	}
	sc.pending, sc.active, sc.done = pending, active, done
	count := float64(len(done))
	c.ttft, c.itl, c.e2e, c.decode = c.ttft/count, c.itl/count, c.e2e/count, c.decode/count
	return c
}

// bend is the ITL law's (b−1)² at x = b−1, or past straight its tangent
// there.
func (tw twin) bend(x float64) float64 {
	if r := tw.straight; r > 0 && x > r {
		return r * (2*x - r)
	}
	return x * x
}

// holding is how many requests hold KV cache at t.
func holding(active []twinReq, t float64) int {
	n := 0
	for _, o := range active {
		if o.end > t {
			n++
		}
	}
	return n
}

// nextEnd is the first end of a request in flight after t.
func nextEnd(active []twinReq, t float64) float64 {
	next := math.Inf(1)
	for _, o := range active {
		if o.end > t {
			next = math.Min(next, o.end)
		}
	}
	return next
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
	sc   scratch
}

func (cs *cells) at(n int) cell {
	if c, ok := cs.seen[n]; ok {
		return c
	}
	if cs.seen == nil {
		cs.seen = map[int]cell{}
	}
	c := cs.tw.closed(n, &cs.sc)
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
