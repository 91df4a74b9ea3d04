package sim

import (
	"math"
	"sort"
)

// toParams maps the fit's free parameters, all in log space so they stay
// positive, onto a profile: step_base, decode_per_seq, decode_exp,
// decode_per_kv, prefill_per_token, prefill_attn, overhead, kv_capacity,
// chunk_budget.
func toParams(x []float64, r Report) Params {
	e := func(i int) float64 { return math.Exp(x[i]) }
	return Params{
		StepBase: e(0), DecodePerSeq: e(1), DecodeExp: math.Min(1.5, e(2)), DecodePerKV: e(3),
		PrefillPerToken: e(4), PrefillAttn: e(5), Overhead: e(6),
		KVCapacity:  int(math.Max(300_000, e(7))),
		ChunkBudget: int(math.Max(256, math.Min(65536, e(8)))),
		MaxBatch:    512, GPUs: max(1, r.GPUs), IdleWatts: 0.12 * r.TDPWatts, MaxWatts: 0.9 * r.TDPWatts,
	}
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
		math.Log(2.5e-5), math.Log(3e-10), math.Log(math.Max(0.005, 0.6*ttft1)), math.Log(1e6), math.Log(8192),
	}
}

// Loss is the fit's objective for a report: weighted squared log errors of
// every judged figure plus the capacity-like figures.
func Loss(p Params, r Report) float64 {
	cells := cellCache{}
	loss := 0.0
	for _, f := range r.Figures {
		w := map[string]float64{"key": 3, "table": 1, "info": 0.2}[f.Kind]
		if f.Note != "" || w == 0 {
			continue
		}
		v := Simulate(p, f, cells)
		if !(v > 0) {
			return math.Inf(1)
		}
		d := math.Log(v / f.Value)
		loss += w * d * d
	}
	// At a report's capacity limit the use case sits on its threshold: the
	// margin there is the most direct statement of the limit and cheap to fit.
	for _, u := range r.UseCases {
		m := u.Margin(cells.get(p, u.Context, u.Output, int(math.Round(u.Capacity)), false))
		if u.Capped {
			m = math.Min(0, m)
		}
		loss += 4 * m * m
	}
	for _, q := range r.SafeQueue {
		d := math.Log(math.Max(0.5, SafeDepth(p, q)) / q.Depth)
		loss += 2 * d * d
	}
	return loss
}

// Calibrate fits a profile's parameters to a report's figures with Nelder-Mead
// in log space. evals bounds the work; the result is deterministic.
func Calibrate(r Report, evals int) (Params, float64) {
	f := func(x []float64) float64 { return Loss(toParams(x, r), r) }
	x, _ := nelderMead(f, initial(r), 0.7, evals)
	// A restart from the optimum escapes the simplex collapsing early.
	x, fx := nelderMead(f, x, 0.3, evals/2)
	return toParams(x, r), fx
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
