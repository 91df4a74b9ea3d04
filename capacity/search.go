package capacity

// Search finds the largest concurrency in 1..maxN at which margin(n) >= 0:
// exponential steps from 1 until a level fails, then bisection down to two
// adjacent levels, interpolated linearly on the margin between the last
// passing and the first failing one. capped is true when no level up to maxN
// fails; limit is 0 when even one request fails. margin is called at most
// once per level and may fail (a benchmark cell that could not run).
func Search(maxN int, margin func(n int) (float64, error)) (limit float64, capped bool, err error) {
	lo, hi := 0, 0
	mLo, mHi := 1.0, 0.0
	for n := 1; ; n = min(2*n, maxN) {
		m, err := margin(n)
		if err != nil {
			return 0, false, err
		}
		if m < 0 {
			hi, mHi = n, m
			break
		}
		lo, mLo = n, m
		if n >= maxN {
			return float64(lo), true, nil
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		m, err := margin(mid)
		if err != nil {
			return 0, false, err
		}
		if m >= 0 {
			lo, mLo = mid, m
		} else {
			hi, mHi = mid, m
		}
	}
	if lo == 0 {
		return 0, false, nil
	}
	return Interpolate(lo, hi, mLo, mHi), false, nil
}

// Interpolate places the crossing between a passing level lo (margin mLo >= 0)
// and a failing level hi (mHi < 0) where the margin, taken as linear in
// concurrency, reaches zero.
func Interpolate(lo, hi int, mLo, mHi float64) float64 {
	return float64(lo) + float64(hi-lo)*mLo/(mLo-mHi)
}
