package capacity

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// cellTTFT is TTFT's burst curve as a benchmark measures it: at N, the
// statistic of the TTFTs of a cell of N requests sent together, which queue
// for prefill in positions 1 to N. A burst amid production stands at the
// back of its queue: its level counts every prompt prefilled before its
// last first token, production's included (monitor.BurstLevel), but its n
// probes hold only the last n positions of that level, whose TTFTs are the
// longest of such a cell. The positions before them, production's, are
// filled in back from the burst's first first token at the step between
// its own first tokens, down to one request alone (the bursts of one) at
// the lowest, and the cell's statistic is taken over both: a burst of two
// at level 5.4 in the simulator of report 002 at 64K, TTFTs of 19.5 and
// 23.5 s where one request alone took 4.1, stands for a cell of 5.4 at
// 15.1 s, not at their mean of 21.5. The step is the engine's: one
// prefill a position where it serves prompts first come, first served
// (vLLM), none where it prefills a wave side by side (the simulators of
// reports 000 and 001), where seven 32K probes sent amid nine users'
// decode all got their first token at 8.57 s. The line from one request
// alone to the first first token, which this replaced, put those
// positions at a prefill a position even there, and report 001's chatbot
// at 7.4 and 8.4 where its report says 6 (6.3 in the simulator by the
// report's protocol). A burst that held every position of its level (sent
// at a quiet moment) is its own cell, as is a bench cell; without a burst
// of one, nothing is filled in and the burst's own statistic, which errs
// high, stands.
func cellTTFT(together []Point, stat string) Curve {
	bursts := map[burst][]Point{}
	var keys []burst
	var idle []float64
	for _, p := range together {
		if p.Burst == 1 && p.Load <= idleLevel { // not a lone probe standing at a busier level (split)
			idle = append(idle, p.TTFT)
		}
		k := burstOf(p)
		if _, ok := bursts[k]; !ok {
			keys = append(keys, k)
		}
		bursts[k] = append(bursts[k], p)
	}
	one := Statistic(idle, "mean") // NaN: no burst of one
	type cell struct {
		levels, values []float64
	}
	bins := map[int]*cell{}
	for _, k := range keys {
		if math.IsNaN(k.level) || k.level <= 0 {
			continue
		}
		ps := bursts[k]
		slices.SortStableFunc(ps, func(a, b Point) int { return cmp.Compare(a.TTFT, b.TTFT) })
		b := int(math.Round(k.level))
		if bins[b] == nil {
			bins[b] = &cell{}
		}
		c := bins[b]
		for _, p := range ps {
			c.levels, c.values = append(c.levels, k.level), append(c.values, p.TTFT)
		}
		sent := max(len(ps), ps[0].Burst) // a failed probe held its position too
		ahead := b - sent                 // positions held by others
		if ahead <= 0 || math.IsNaN(one) || ps[0].Cell > 0 {
			continue
		}
		first := k.level - float64(sent) + 1 // the position of the burst's first first token
		step := (ps[0].TTFT - one) / (first - 1)
		if len(ps) > 1 {
			step = (ps[len(ps)-1].TTFT - ps[0].TTFT) / float64(len(ps)-1)
		}
		for i := 1; i <= ahead; i++ {
			x := float64(i) * (first - 1) / float64(ahead) // spread to the position before it
			c.values = append(c.values, math.Max(one, ps[0].TTFT-step*(first-x)))
		}
	}
	var out Curve
	for _, c := range bins {
		out = append(out, Knot{Load: Statistic(c.levels, "mean"), Value: Statistic(c.values, stat), N: len(c.levels)})
	}
	slices.SortFunc(out, func(a, b Knot) int { return cmp.Compare(a.Load, b.Load) })
	return isotonic(out, true)
}

// burst is what the probes of one burst share, as the monitor tags them:
// when it was sent and its level; a bench cell's requests, their cell.
type burst struct {
	at    time.Time
	level float64
	cell  int
}

func burstOf(p Point) burst {
	if p.Cell > 0 {
		return burst{level: p.Load, cell: p.Cell}
	}
	return burst{at: p.Time, level: p.Load}
}

// Overhead is the part of one request's TTFT that requests sent together
// do not queue for: the HTTP round trip, tokenizing, scheduling, which
// the server does for each request side by side. The bound from one level
// (Curve.extended) multiplies the rest only: n prompts sent together need
// n prefills, not n overheads. Report 000's server takes 0.38 s to a 1K
// prompt's first token and 0.6 s to an 8K one's, so most of the 1K figure
// is not prefill.
//
// It is taken from the quickest probes that met no other prefill at each
// prompt length (byPrompt, the target's scenarios by their input tokens):
// the line through the two shortest lengths, at length zero. Prefill time
// grows at least linearly with the prompt (attention, superlinearly), so
// that line passes at or below the true overhead, and the bound stays a
// bound. 0 where fewer than two lengths have such a probe, or the longer
// was not the slower.
func Overhead(byPrompt map[int][]Point) float64 {
	type quickest struct {
		length int
		ttft   float64
	}
	var qs []quickest
	for length, ps := range byPrompt {
		q := math.Inf(1)
		for _, p := range ps {
			if p.Burst == 0 && !p.Aftermath && p.Level >= 1 && p.Level <= idleLevel && p.TTFT > 0 {
				q = math.Min(q, p.TTFT)
			}
		}
		if length > 0 && !math.IsInf(q, 1) {
			qs = append(qs, quickest{length, q})
		}
	}
	if len(qs) < 2 {
		return 0
	}
	slices.SortFunc(qs, func(a, b quickest) int { return cmp.Compare(a.length, b.length) })
	a, b := qs[0], qs[1]
	if !(b.ttft > a.ttft) {
		return 0
	}
	return math.Max(0, a.ttft-float64(a.length)*(b.ttft-a.ttft)/float64(b.length-a.length))
}
