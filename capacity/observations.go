package capacity

import (
	"cmp"
	"math"
	"slices"
)

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
	// prod: production's requests in its batch (of b), for the levelling's
	// test (concave): a whole engine reading's batch, b − 1 for a lone
	// probe, what a burst's probe decoded beside of production's.
	prod float64
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
	out := make([]obs, 0, len(points)) // one a point at most
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
			o := obs{q: 1, level: b, a: b, b: b, kv: excess(p), itl: p.ITL, decodeOK: true, prefilling: p.Waiting, group: engineGroups + int(math.Round(b)), prod: b}
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
				prod: b - 1})
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
				kv: excess(g[0]), ttft: p.TTFT, e2e: p.E2E, group: len(points) + gi, gap: p.MaxGap, prod: running}
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
				o.prod = production
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
