package capacity

import (
	"cmp"
	"container/heap"
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
// TTFT law from the prefills queued ahead of it and the requests running;
// its ITL, at its first token, by the ITL law from the batch it decodes in
// and the requests it arrived into. The production in flight now (running,
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
}

// with is the twin of these laws' coefficients.
func (tw twin) with(ttft, itl []float64) twin {
	tw.ttft, tw.itl = ttft, itl
	if tw.ttft == nil {
		tw.ttft = []float64{0, 0, 0}
	}
	if tw.itl == nil {
		tw.itl = []float64{0, 0, 0, 0, 0}
	}
	return tw
}

// cell is what the twin measures at one n: means over its requests.
type cell struct{ ttft, itl, e2e, decode float64 }

type twinReq struct {
	slot, round               int
	arrive, admit, first, end float64
}

type arrivals []twinReq

func (a arrivals) Len() int { return len(a) }
func (a arrivals) Less(i, j int) bool {
	return a[i].arrive < a[j].arrive || a[i].arrive == a[j].arrive && a[i].slot < a[j].slot
}
func (a arrivals) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a *arrivals) Push(x any)   { *a = append(*a, x.(twinReq)) }
func (a *arrivals) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

func (tw twin) closed(n int) cell {
	if n < 1 {
		return cell{}
	}
	// Each request's decode batch is the time it shares with others'
	// decodes, which depends on when they end: a few passes, each with the
	// batches the one before measured, settle it.
	var seen map[[2]int]beside
	var c cell
	for range twinPasses {
		var done []twinReq
		c, done = tw.run(n, seen)
		seen = besides(done, tw.running, tw.waiting)
	}
	return c
}

// beside is what a request decoded beside: its mean decode batch, and the
// share of its decode during which other prompts were admitted and waited
// for their first token (the ITL law's s).
type beside struct{ batch, prefilling float64 }

// besides is what each request decoded beside. Its batch: itself,
// production's running requests and, for each other request, the share of
// its decode it decoded beside it. With D(t) the requests decoding at t and
// F its integral, a request decoding from a to b shares F(b) - F(a) - (b -
// a) request-seconds with the others: one sweep over the sorted starts and
// ends, not a comparison of every pair. Production's waiting prompts, when
// there are any, are prefilling all along.
func besides(done []twinReq, running, waiting float64) map[[2]int]beside {
	type edge struct {
		t float64
		d int
	}
	edges := make([]edge, 0, 2*len(done))
	for _, r := range done {
		edges = append(edges, edge{r.first, 1}, edge{r.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.t, b.t) })
	ts := make([]float64, len(edges))
	fs := make([]float64, len(edges)) // F at each edge's time
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
	pending := prefillSpans(done)
	out := make(map[[2]int]beside, len(done))
	for _, r := range done {
		s := beside{batch: 1 + running, prefilling: 1}
		if span := r.end - r.first; span > 0 {
			s.batch += math.Max(0, at(r.end)-at(r.first)-span) / span
			if waiting == 0 {
				s.prefilling = (pending.upTo(r.end) - pending.upTo(r.first)) / span
			}
		}
		out[[2]int{r.slot, r.round}] = s
	}
	return out
}

// spans is a union of disjoint time spans, in order, with the length they
// cover up to each one's start.
type spans struct{ from, to, before []float64 }

// prefillSpans is when some request was admitted and waiting for its
// first token.
func prefillSpans(done []twinReq) spans {
	order := slices.SortedFunc(slices.Values(done), func(a, b twinReq) int { return cmp.Compare(a.admit, b.admit) })
	var s spans
	covered := 0.0
	for _, r := range order {
		if r.first <= r.admit {
			continue
		}
		if n := len(s.to); n > 0 && r.admit <= s.to[n-1] {
			if r.first > s.to[n-1] {
				covered += r.first - s.to[n-1]
				s.to[n-1] = r.first
			}
			continue
		}
		s.from, s.to, s.before = append(s.from, r.admit), append(s.to, r.first), append(s.before, covered)
		covered += r.first - r.admit
	}
	return s
}

// upTo is the time the spans cover before t.
func (s spans) upTo(t float64) float64 {
	i, _ := slices.BinarySearch(s.from, t) // spans starting before t: [0, i)
	if i == 0 {
		return 0
	}
	return s.before[i-1] + math.Min(t, s.to[i-1]) - s.from[i-1]
}

// twinPasses is how many passes closed makes: the batches move little after
// the second.
const twinPasses = 2

func (tw twin) run(n int, seen map[[2]int]beside) (cell, []twinReq) {
	var c cell
	pending := make(arrivals, n)
	for i := range pending {
		pending[i] = twinReq{slot: i}
	}
	heap.Init(&pending)
	var active, done []twinReq
	need := tw.input + tw.output
	admitted := 0.0 // when the last request was admitted: none overtakes it
	for pending.Len() > 0 {
		r := heap.Pop(&pending).(twinReq)
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
		ttft := tw.ttft[0] + tw.ttft[1]*(ahead+tw.waiting) + tw.ttft[2]*(running+behind+tw.running)
		r.first = t + math.Max(ttft, 0)
		inFlight := 1 + ahead + running + behind + tw.running + tw.waiting
		s, ok := seen[[2]int{r.slot, r.round}]
		if !ok {
			// The first pass takes every request in flight on arrival to
			// decode beside it, and prompts to wait for prefill all along
			// its decode while any are behind it; the later ones measure
			// both.
			s = beside{batch: inFlight}
			if behind+tw.waiting > 0 {
				s.prefilling = 1
			}
		}
		itl := tw.itl[0] + tw.itl[1]*(s.batch-1) + tw.itl[2]*math.Max(inFlight-s.batch, 0)
		itl += tw.itl[3]*s.prefilling + tw.itl[curved]*(s.batch-1)*(s.batch-1)
		itl = math.Max(itl, 1e-9)
		r.end = r.first + (tw.output-1)*itl
		active = append(active, r)
		done = append(done, r)
		c.ttft += r.first - r.arrive
		c.itl += itl
		c.e2e += r.end - r.arrive
		c.decode += 1 / itl
		if r.round+1 < rounds {
			heap.Push(&pending, twinReq{slot: r.slot, round: r.round + 1, arrive: r.end})
		}
	}
	count := float64(len(done))
	c.ttft, c.itl, c.e2e, c.decode = c.ttft/count, c.itl/count, c.e2e/count, c.decode/count
	return c, done
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
	c := cs.tw.closed(n)
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
