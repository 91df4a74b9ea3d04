package capacity

import (
	"fmt"
	"math"
	"slices"
)

// linearFit is a robust least-squares fit y ≈ Σ beta[j]·x[j] with the
// covariance of beta, from which every bound of the model comes.
type linearFit struct {
	beta []float64
	cov  [][]float64 // of beta; zero rows and columns for a dropped column
	// varies marks the columns the data vary along; used those fitted: a
	// dropped one (no spread, or a slope pushed below zero) has beta 0.
	varies, used []bool
	scale        float64   // relative residual scale, pooled with scale0
	resid        []float64 // y - fitted, per observation
	// df is the scale's degrees of freedom: the observations less the
	// coefficients, plus pooled where a scale came from elsewhere.
	df float64
}

// z is the two-sided 95% normal quantile: Student's t (quantile) in the
// limit of many degrees of freedom.
const z = 1.96

// shows says the fit holds column col's coefficient above Student's t
// times its standard error: the data tell it from zero.
func (f linearFit) shows(col int) bool {
	return f.used[col] && f.beta[col] > f.quantile()*math.Sqrt(f.cov[col][col])
}

// quantile is the two-sided 95% quantile of Student's t at the fit's
// degrees of freedom: its scale is estimated, and from few observations a
// band of z standard errors holds the truth far less often than 95%.
func (f linearFit) quantile() float64 {
	// t(0.975) for 1 to 30 degrees of freedom; past them, the first terms
	// of its expansion in 1/df about z (within 0.001).
	table := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	switch df := math.Floor(f.df); {
	case df < 1:
		return math.Inf(1)
	case df <= float64(len(table)):
		return table[int(df)-1]
	default:
		return z + (z*z*z+z)/(4*df) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*df*df)
	}
}

// huber is the Huber weights' tuning constant, in units of the residual
// scale (95% efficiency under Gaussian noise): a probe that stalled behind
// something no term counts weighs as its distance, not its square. A
// redescending weight (Tukey's bisquare) would give it none, and with it
// the bursts at the highest levels whenever a law bends away from the line
// of the idle probes: those are the law, not outliers.
const huber = 1.345

// typicalScale is a relative residual scale to start from where nothing
// else is known: probes of one shape at one load scatter by about 10%.
const typicalScale = 0.1

// resolution is the smallest relative scatter the robust weights take
// for a probe's noise: a latency is not measured to better than about 1%
// (the server's scheduling, the network, the clock).
const resolution = 0.01

// robustFrom is the fewest degrees of freedom at which robust weights
// apply: with fewer, a burst that disagrees with two idle probes is as
// likely the law as an outlier, and reweighting would throw the law away.
const robustFrom = 3

func cols(used []bool) int {
	n := 0
	for _, u := range used {
		if u {
			n++
		}
	}
	return n
}

// pooled is how many observations' worth a scale known from elsewhere
// counts for (fitLinear's scale0).
const pooled = 2.0

// slopePrior is what is known of a law's slopes before the data: per
// column, its value and standard deviation (rows; none for nothing). s2
// (> 0) is the data's own relative residual variance, from their fit
// without the prior: what the prior's rows weigh against.
type slopePrior struct {
	rows []priorRow
	s2   float64
}

// priorRow is what is known of one coefficient, column col, before the
// data: its value and standard deviation (sd > 0).
type priorRow struct {
	col       int
	value, sd float64
}

// on says whether the prior knows column j.
func (p slopePrior) on(j int) bool {
	return slices.ContainsFunc(p.rows, func(r priorRow) bool { return r.col == j })
}

// fitLinear fits y on the columns of x (x[i][j]: observation i, column j;
// column 0 is the intercept) by iteratively reweighted least squares with
// Huber weights. Columns marked nonneg are slopes that physics keeps at or
// above zero (more load never makes a server faster): one fitted below zero
// is held at zero and the rest refitted, as an active-set solver does.
// A column the data do not vary along is dropped; ok is false when not even
// the intercept is fitted.
//
// Each row of a prior joins the data as one more observation of its
// coefficient alone, whose variance is its sd²: a ridge toward what the
// target's other use cases say, which the use case's own data outweigh as
// they come. scale0 (> 0) is a relative residual scale known from
// elsewhere (the target's other use cases), worth two observations' say
// in the scale, so that a fit of a few observations still has bounds.
// groups (nil: none) says which observations share a moment (clustered).
func fitLinear(x [][]float64, y []float64, groups []int, nonneg []bool, prior slopePrior, scale0 float64) (f linearFit, ok bool) {
	k, nObs := len(nonneg), len(y)
	f.used, f.varies = make([]bool, k), make([]bool, k)
	for j := range k {
		f.varies[j] = j == 0 || spread(x, j) || prior.on(j)
		f.used[j] = f.varies[j]
	}
	// A term beyond the law's intercept and its slope is fitted only where
	// the observations leave the fit a degree of freedom of its own: one
	// that passes through every observation absorbs their noise into its
	// coefficients and has nothing to check them by (noise/4's chatbot
	// under load: two lone probes, one of them a 7x outlier, fitted δ0, δa
	// and δ2 through both, a step of 122 ms against the 10 ms measured
	// alone and a capacity of 0 between bounds of 0 and 0). The slope
	// itself is fitted from two observations (MinSamples), its scatter
	// from elsewhere; the prior's columns are not the data's to pay for.
	for {
		own, last := 0, -1
		for j, u := range f.used {
			if u && !prior.on(j) {
				own++
				if j >= 2 {
					last = j
				}
			}
		}
		if own < nObs || last < 0 {
			break
		}
		f.used[last] = false
	}
	if len(prior.rows) > 0 {
		// The prior's rows: y = the coefficient, in its own column; each
		// one's weight is set each round from the scale (w = σ²/sd²), so
		// that it is worth its variance whatever the data's.
		x, y = slices.Clone(x), slices.Clone(y)
		for _, r := range prior.rows {
			row := make([]float64, k)
			row[r.col] = 1
			x, y = append(x, row), append(y, r.value)
		}
	}
	// Latency noise is multiplicative (a probe meets a busier or quieter
	// moment in proportion to its length), so each observation weighs as
	// 1/y²: the fit is of relative error, and a burst's long TTFT does
	// not drown the idle probes' short ones. rw are the robust weights.
	base, w, rw := make([]float64, len(y)), make([]float64, len(y)), make([]float64, len(y))
	for i := range y {
		base[i] = 1 / (y[i] * y[i])
		rw[i] = 1
		w[i] = base[i]
	}
	// sigma2 is the relative residual variance, pooled with scale0, and
	// its degrees of freedom.
	sigma2 := func() (s2, df float64) {
		ss, sw := 0.0, 0.0
		for i := range nObs {
			ss += w[i] * f.resid[i] * f.resid[i]
			sw += rw[i]
		}
		p := -len(prior.rows) // the prior's columns are not the data's to pay for
		for _, u := range f.used {
			if u {
				p++
			}
		}
		dof, nu := float64(nObs-p), 0.0
		if scale0 > 0 {
			nu = pooled
		}
		if df = dof + nu; df <= 0 || sw == 0 {
			return math.Inf(1), df
		}
		return (ss*float64(nObs)/sw + nu*scale0*scale0) / df, df
	}
	setPrior := func() {
		if len(prior.rows) > 0 {
			// Against the data's own scatter, not their residuals about
			// this fit: those grow as the prior pulls the fit from the
			// data, and a prior weighed by them pulls harder the further
			// it has pulled (the demo's chatbot: 26 probes on a line of
			// 1.2 s a prompt fitted 0.29 s, its residual scale 0.04 ->
			// 0.57).
			s2, _ := sigma2()
			if prior.s2 > 0 {
				s2 = prior.s2
			}
			if math.IsInf(s2, 1) || s2 == 0 {
				// Before the data say how far they scatter: elsewhere's
				// scale, or a probe's typical 10%.
				s2 = math.Max(scale0*scale0, typicalScale*typicalScale)
			}
			for i, r := range prior.rows {
				base[nObs+i], rw[nObs+i] = 1, 1
				w[nObs+i] = s2 / (r.sd * r.sd)
			}
		}
	}
	if len(prior.rows) > 0 {
		f.resid = make([]float64, len(y))
		setPrior()
	}
	for range 40 {
		for {
			beta, _, solved := weightedLS(x, y, w, f.used, false)
			if !solved {
				// Collinear in these data (a burst whose level and batch
				// rose together, beside probes at rest): the last column
				// that varies goes, as its effect cannot be told apart.
				j := slices.Index(f.used[1:], true)
				if j < 0 {
					return f, false
				}
				last := k - 1
				for !f.used[last] {
					last--
				}
				f.used[last] = false
				continue
			}
			neg := -1
			for j := 1; j < k; j++ {
				if f.used[j] && nonneg[j] && beta[j] < 0 && (neg < 0 || beta[j] < beta[neg]) {
					neg = j
				}
			}
			if neg < 0 {
				f.beta = beta
				break
			}
			f.used[neg] = false
		}
		f.resid = residuals(x, y, f.beta)
		if nObs-cols(f.used) < robustFrom {
			break // too few to tell an outlier from the law
		}
		rel := make([]float64, nObs)
		for i := range rel {
			rel[i] = f.resid[i] * math.Sqrt(base[i])
		}
		// A burst's probes stand many to a level, and a law that fits
		// the levels well leaves most residuals near zero: their median
		// is then no measure of the noise, and would take every level
		// the law fits less well for an outlier.
		s := math.Max(mad(rel), resolution)
		changed := false
		for i, r := range rel {
			nw, a := 1.0, math.Abs(r)/s
			if a > huber {
				nw = huber / a
			}
			if math.Abs(nw-rw[i]) > 1e-6 {
				changed = true
			}
			rw[i], w[i] = nw, nw*base[i]
		}
		setPrior()
		if !changed {
			break
		}
	}
	setPrior()
	_, inv, _ := weightedLS(x, y, w, f.used, true)
	s2, df := sigma2()
	f.scale, f.df = math.Sqrt(s2), df
	rows := f.resid
	f.resid = f.resid[:nObs]
	f.cov = make([][]float64, k)
	for a := range k {
		f.cov[a] = make([]float64, k)
		for b := range k {
			if inv != nil && !math.IsInf(s2, 1) {
				f.cov[a][b] = s2 * inv[a][b]
			} else if f.used[a] && f.used[b] {
				f.cov[a][b] = math.Inf(1)
			}
		}
	}
	if groups != nil && inv != nil && !math.IsInf(s2, 1) {
		f.clustered(x, w, rows, groups, inv)
	}
	return f, true
}

// clustered widens the covariance where the observations of one group
// (a burst's probes, which share its moment: the load it met, what the
// law misses at its level) stray from the law together. The model's
// covariance takes every observation for an independent draw: thirty
// probes of one burst that sit 5% above the law count as thirty
// agreeing measurements, not one. The cluster-robust (sandwich)
// variance of each coefficient counts them as one, with the small-sample
// factor of CR1; where it exceeds the model's, the coefficient's row and
// column are scaled to it (the correlations kept). It never narrows a
// band: with few groups the sandwich is itself uncertain. Its quantile
// comes from the groups too (below).
func (f *linearFit) clustered(x [][]float64, w, resid []float64, groups []int, inv [][]float64) {
	k := len(f.beta)
	// Each row's group's place in scores, in order of appearance, so the
	// sums run in one order. A burst's rows come together, so the search
	// from the latest group seen ends at once; it allocates nothing per
	// group, where a map and a slice a group had made this the fleet's
	// largest allocation (every refit of every use case calls it).
	seen := make([]int, 0, len(resid))
	at := make([]int, len(resid))
	for i := range resid {
		g := len(groups) - 1 - i // each prior row: a group of its own
		if i < len(groups) {
			g = groups[i]
		}
		j := len(seen) - 1
		for j >= 0 && seen[j] != g {
			j--
		}
		if j < 0 {
			j = len(seen)
			seen = append(seen, g)
		}
		at[i] = j
	}
	flat := make([]float64, len(seen)*k)
	for i := range resid {
		s := flat[at[i]*k : (at[i]+1)*k]
		for j := range k {
			if f.used[j] {
				s[j] += w[i] * resid[i] * x[i][j]
			}
		}
	}
	nG, n, p := float64(len(seen)), float64(len(resid)), float64(cols(f.used))
	if nG < 2 || n <= p {
		return
	}
	// The band's quantile is Student's t at the groups less one degrees
	// of freedom, not the probes less the coefficients (Cameron and
	// Miller, "A Practitioner's Guide to Cluster-Robust Inference", 2015,
	// VI.D): the coefficients rest on as many moments as there are
	// groups, whatever the probes in each. Three bursts and two lone
	// probes are five observations of the law, not forty. On the suite's
	// default seeds and two fresh sets it took the truths inside the
	// bounds 1,259 -> 1,279 of 1,350 and off 2x 38 -> 31, for 933 -> 923
	// within (docs/capacity.md).
	f.df = math.Min(f.df, nG-1)
	c := nG / (nG - 1) * (n - 1) / (n - p)
	scale := make([]float64, k)
	for j := range k {
		scale[j] = 1
		if !f.used[j] || !(f.cov[j][j] > 0) {
			continue
		}
		v := 0.0
		for g := range len(seen) {
			s := flat[g*k : (g+1)*k]
			u := 0.0
			for a := range k {
				u += inv[j][a] * s[a]
			}
			v += u * u
		}
		scale[j] = math.Sqrt(math.Max(1, c*v/f.cov[j][j]))
	}
	for a := range k {
		for b := range k {
			f.cov[a][b] *= scale[a] * scale[b]
		}
	}
}

// spread says whether column j varies across the observations by more than
// leastSpread: less cannot carry a slope.
func spread(x [][]float64, j int) bool { return rangeOf(x, j) > leastSpread }

// leastSpread is the least a column must vary to carry a slope: a tenth of
// a request, or of a thousand KV tokens.
const leastSpread = 0.1

// rangeOf is how far column j spans in x.
func rangeOf(x [][]float64, j int) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range x {
		lo, hi = math.Min(lo, r[j]), math.Max(hi, r[j])
	}
	return hi - lo
}

func residuals(x [][]float64, y, beta []float64) []float64 {
	out := make([]float64, len(y))
	for i, r := range x {
		fit := 0.0
		for j, b := range beta {
			fit += b * r[j]
		}
		out[i] = y[i] - fit
	}
	return out
}

// mad is the median absolute residual scaled to a Gaussian's standard
// deviation.
func mad(r []float64) float64 {
	a := make([]float64, len(r))
	for i, v := range r {
		a[i] = math.Abs(v)
	}
	slices.Sort(a)
	if len(a) == 0 {
		return 0
	}
	return 1.4826 * a[len(a)/2]
}

// maxCols is how many columns weightedLS solves for on the stack; a law
// has at most itlCols.
const maxCols = 8

// pivotTolerance is the share of a column's own scale below which its
// pivot is rounding: float64's 1e-16, grown by the elimination's few
// steps and the columns' condition (a latency's columns span requests
// from 1 to thousands, their squares to millions).
const pivotTolerance = 1e-10

// weightedLS solves the weighted normal equations over the used columns;
// beta is zero for the others, and inv (where wantInv) is (XᵀWX)⁻¹ laid
// out over all columns (zero where not used). solved is false when the
// used columns are collinear in the data. The robust fit solves up to 40
// times a fit, and the fits of a 1,000-target fleet allocated a quarter of
// the daemon's bytes here: the working matrix is on the stack, and the
// inverse is built only where it is kept.
func weightedLS(x [][]float64, y, w []float64, used []bool, wantInv bool) (beta []float64, inv [][]float64, solved bool) {
	cols := make([]int, 0, maxCols)
	for j, u := range used {
		if u {
			cols = append(cols, j)
		}
	}
	p := len(cols)
	if p > maxCols {
		panic(fmt.Sprintf("capacity: a law of %d columns, more than %d", p, maxCols))
	}
	var buf [maxCols * (2*maxCols + 1)]float64
	// The rows are swapped in the array itself: a store through a slice
	// of it would move buf to the heap.
	var rows [maxCols][]float64
	for i := range p {
		rows[i] = buf[i*(2*p+1) : (i+1)*(2*p+1)] // [XᵀWX | I | XᵀWy]
		rows[i][p+i] = 1
	}
	a := rows[:p]
	for i, r := range x {
		for s, js := range cols {
			for t, jt := range cols {
				a[s][t] += w[i] * r[js] * r[jt]
			}
			a[s][2*p] += w[i] * r[js] * y[i]
		}
	}
	// Gauss-Jordan with partial pivoting: at most six columns. A column is
	// a combination of the ones before it where its pivot has fallen to
	// rounding against its own scale (its diagonal before elimination,
	// Σ w·x²). Measured against what was left of it, the rounding's residue
	// passed for a pivot, and a system of more columns than observations
	// was solved, its coefficients that residue's, in runs of noise/4
	// under load (TestWeightedLSRefusesASingularSystem).
	var scale [maxCols]float64
	for c := range p {
		scale[c] = a[c][c]
	}
	for c := range p {
		piv := c
		for r := c + 1; r < p; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		if !(math.Abs(a[piv][c]) > pivotTolerance*scale[c]) {
			return nil, nil, false
		}
		rows[c], rows[piv] = rows[piv], rows[c]
		d := a[c][c]
		for j := range a[c] {
			a[c][j] /= d
		}
		for r := range p {
			if r != c && a[r][c] != 0 {
				m := a[r][c]
				for j := range a[r] {
					a[r][j] -= m * a[c][j]
				}
			}
		}
	}
	beta = make([]float64, len(used))
	for s, js := range cols {
		beta[js] = a[s][2*p]
	}
	if !wantInv {
		return beta, nil, true
	}
	inv = make([][]float64, len(used))
	for j := range inv {
		inv[j] = make([]float64, len(used))
	}
	for s, js := range cols {
		for t, jt := range cols {
			inv[js][jt] = a[s][p+t]
		}
	}
	return beta, inv, true
}
