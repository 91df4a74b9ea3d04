package sim

import (
	"math"
	"sort"
)

// toParams maps the fit's free parameters, all in log space so they stay
// positive, onto a profile: step_base, decode_per_seq, decode_exp,
// decode_per_kv, prefill_per_token, prefill_attn, overhead, kv_capacity,
// chunk_budget, throughput_accounting, prefill_slots, frontend_per_request,
// decode_linear, graph_batch, eager_step and, when x has it,
// prefill_attn_exp (else quadratic).
func toParams(x []float64, r Report) Params {
	e := func(i int) float64 { return math.Exp(x[i]) }
	accounting := math.Min(1.2, math.Max(0.5, e(9)))
	if r.StreamThroughput {
		accounting = 0 // not used: see Report.StreamThroughput
	}
	p := Params{
		StepBase: e(0), DecodePerSeq: e(1), DecodeExp: math.Min(1.5, e(2)), DecodePerKV: e(3),
		PrefillPerToken: e(4), PrefillAttn: e(5), Overhead: e(6),
		KVCapacity:           int(math.Max(300_000, e(7))),
		ChunkBudget:          int(math.Max(256, math.Min(65536, e(8)))),
		ThroughputAccounting: accounting,
		PrefillSlots:         int(math.Round(math.Max(1, math.Min(256, e(10))))),
		FrontendPerRequest:   e(11),
		DecodeLinear:         e(12),
		GraphBatch:           int(math.Max(8, math.Min(512, e(13)))), // a batch over e(13) is one over its floor
		EagerStep:            e(14),
		MaxBatch:             512, GPUs: max(1, r.GPUs), IdleWatts: 0.12 * r.TDPWatts, MaxWatts: 0.9 * r.TDPWatts,
	}
	if len(x) > 15 {
		p.PrefillAttnExp = math.Max(1, math.Min(2.5, e(15)))
	}
	if p.GraphBatch >= p.MaxBatch {
		p.GraphBatch, p.EagerStep = 0, 0 // every batch is captured
	}
	return p
}

// initial guesses from the single-request figures, so the search starts near.
func initial(r Report) []float64 {
	dec1, ttft1 := 150.0, 0.2
	for _, f := range r.Figures {
		if f.N == 1 && f.Context == 1024 {
			switch f.Metric {
			case "decode":
				dec1 = f.Value
			case "ttft":
				ttft1 = f.Value
			}
		}
	}
	step := 1 / dec1
	return []float64{
		math.Log(0.5 * step), math.Log(0.4 * step), math.Log(0.7), math.Log(5e-9),
		math.Log(2.5e-5), math.Log(3e-10), math.Log(math.Max(0.005, 0.6*ttft1)), math.Log(1e6), math.Log(8192), 0, math.Log(4), math.Log(1e-3), math.Log(2e-5),
	}
}

// Loss is the fit's objective for a report: weighted squared log errors of
// every judged figure (key findings weigh most, info figures pull a little),
// of each use case's capacity limit and of each safe queue depth.
func Loss(p Params, r Report) float64 { return loss(p, r, 0) }

// The tolerance-aware term, added with weight steep, is validation's own
// verdicts: each judged check's error beyond hinge of its tolerance costs
// steeply, so that the fit trades a figure well inside for one just outside,
// as validation counts them.
const (
	hinge         = 0.8
	verdictWeight = 100 // steep in the fit's last phase
)

func loss(p Params, r Report, steep float64) float64 {
	cells := cellCache{}
	total := 0.0
	for _, f := range r.Figures {
		w := map[string]float64{"key": 3, "table": 1, "info": 0.2}[f.Kind]
		if f.Note != "" || w == 0 {
			continue
		}
		v := Simulate(p, r, f, cells)
		if !(v > 0) {
			return math.Inf(1)
		}
		d := math.Log(v / f.Value)
		total += w * d * d
	}
	// A capacity limit is where a use case's margin crosses zero: estimate
	// that crossing from the margins at the limit and 30% above it, so the fit
	// weighs the error in requests, as validation judges it.
	for _, u := range r.UseCases {
		n1 := int(math.Round(u.Capacity))
		n2 := n1 + max(1, int(math.Round(0.3*u.Capacity)))
		m1 := u.Margin(cells.get(p, u.Context, u.Output, n1, false))
		m2 := u.Margin(cells.get(p, u.Context, u.Output, n2, false))
		cross := 4 * u.Capacity
		if m1 > m2 {
			cross = math.Min(cross, math.Max(0.5, float64(n1)+m1/(m1-m2)*float64(n2-n1)))
		}
		if u.Capped {
			cross = math.Min(cross, u.Capacity)
		}
		d := math.Log(cross / u.Capacity)
		total += 4 * d * d
	}
	for _, q := range r.SafeQueue {
		d := math.Log(math.Max(0.5, safeDepth(p, q, cells)) / q.Depth)
		total += 2 * d * d
	}
	if steep > 0 {
		for _, c := range validate(p, r, cells) {
			if c.Judged {
				total += steep * sq(c.outside(hinge))
			}
		}
	}
	return total
}

func sq(x float64) float64 { return x * x }

// noGraph disables the graph-batch cliff: toParams clamps it to the batch.
var noGraph = []float64{math.Log(1024), math.Log(1e-4)}

// Calibrate fits a profile's parameters to a report's figures with Nelder-Mead
// in log space. evals bounds the work of each search; the result is
// deterministic. The returned loss is Loss's.
func Calibrate(r Report, evals int) (Params, float64) {
	objective := func(steep float64, fixed ...float64) func([]float64) float64 {
		return func(x []float64) float64 {
			return loss(toParams(append(append([]float64(nil), x...), fixed...), r), r, steep)
		}
	}
	// The fewer the dimensions, the better the simplex does: first the
	// engine without its graph-batch cliff, and the scheduling, the most
	// discrete choice, started once from first come first served prefill and
	// once from a wave prefilling side by side.
	var plain []float64
	plainF := math.Inf(1)
	for _, slots := range []float64{1, 16} {
		x0 := initial(r)
		x0[10] = math.Log(slots)
		x, _ := nelderMead(objective(0, noGraph...), x0, 0.7, evals)
		// A restart from the optimum escapes the simplex collapsing early.
		x, fx := nelderMead(objective(0, noGraph...), x, 0.3, evals/2)
		if fx < plainF {
			plain, plainF = x, fx
		}
	}
	// Then the cliff, from a few batch sizes: the simplex moves a step's
	// position poorly, since the loss is flat between integer batches.
	var cliff []float64
	cliffF := math.Inf(1)
	for _, g := range []float64{24, 48, 96} {
		x0 := append(append([]float64(nil), plain...), math.Log(g), math.Log(0.005))
		if x, fx := nelderMead(objective(0), x0, 0.3, evals/2); fx < cliffF {
			cliff, cliffF = x, fx
		}
	}
	// Last, validation's verdicts: steep, so from the start they would trap
	// the simplex; they only refine each optimum.
	plain, _ = nelderMead(objective(verdictWeight, noGraph...), plain, 0.1, evals/2)
	cliff, _ = nelderMead(objective(verdictWeight), cliff, 0.1, evals/2)
	// A cliff is a strong claim about the engine (a capacity model cannot
	// see one past the loads it observed): keep it only where the report's
	// figures need it, where it passes more of them.
	bestX := append(plain, noGraph...)
	fails := failures(toParams(bestX, r), r)
	if f := failures(toParams(cliff, r), r); f < fails {
		bestX, fails = cliff, f
	}
	best := toParams(bestX, r)
	// Attention is quadratic in the prompt unless the figures say otherwise:
	// where some still fail, free its exponent too (report 002's TTFT grows
	// as its prompt^1.8 from 64K to 256K tokens), and keep the result where
	// it passes more of them.
	if fails > 0 {
		x := append(append([]float64(nil), bestX...), math.Log(2))
		x, _ = nelderMead(objective(0), x, 0.1, evals)
		x, _ = nelderMead(objective(verdictWeight), x, 0.1, evals)
		if p := toParams(x, r); failures(p, r) < fails {
			best = p
		}
	}
	return best, Loss(best, r)
}

func failures(p Params, r Report) int {
	n := 0
	for _, c := range Validate(p, r) {
		if !c.OK {
			n++
		}
	}
	return n
}

func nelderMead(f func([]float64) float64, x0 []float64, step float64, evals int) ([]float64, float64) {
	n := len(x0)
	type pt struct {
		x []float64
		f float64
	}
	simplex := make([]pt, n+1)
	for i := range simplex {
		x := append([]float64(nil), x0...)
		if i > 0 {
			x[i-1] += step
		}
		simplex[i] = pt{x, f(x)}
	}
	used := n + 1
	comb := func(a []float64, b []float64, t float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = a[i] + t*(b[i]-a[i])
		}
		return out
	}
	for used < evals {
		sort.Slice(simplex, func(i, j int) bool { return simplex[i].f < simplex[j].f })
		cent := make([]float64, n)
		for _, p := range simplex[:n] {
			for i := range cent {
				cent[i] += p.x[i] / float64(n)
			}
		}
		worst := simplex[n]
		xr := comb(cent, worst.x, -1)
		fr := f(xr)
		used++
		switch {
		case fr < simplex[0].f:
			xe := comb(cent, worst.x, -2)
			fe := f(xe)
			used++
			if fe < fr {
				simplex[n] = pt{xe, fe}
			} else {
				simplex[n] = pt{xr, fr}
			}
		case fr < simplex[n-1].f:
			simplex[n] = pt{xr, fr}
		default:
			xc := comb(cent, worst.x, 0.5)
			fc := f(xc)
			used++
			if fc < worst.f {
				simplex[n] = pt{xc, fc}
				continue
			}
			for i := 1; i <= n; i++ {
				xs := comb(simplex[0].x, simplex[i].x, 0.5)
				simplex[i] = pt{xs, f(xs)}
				used++
			}
		}
	}
	sort.Slice(simplex, func(i, j int) bool { return simplex[i].f < simplex[j].f })
	return simplex[0].x, simplex[0].f
}
