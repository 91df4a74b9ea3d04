package capacity

import (
	"cmp"
	"math"
	"slices"
)

// PrefillCost is what a prompt's prefill costs the engine per token against
// its length, as the target's use cases measured it alone: each one's TTFT
// intercept less the lag (τ0 − lag, the engine's work for its prompt alone)
// over its prompt's tokens, at its prompt's length. The zero PrefillCost
// knows nothing, and counts every token alike.
//
// A probe's level counts production's prompts ahead of it by their tokens
// over its own (monitor.BurstLevel), which is right only where a prefill
// costs as its tokens. Attention reads the whole context for each token, so
// a long prompt costs more per token than a short one: on report 002's
// simulator a 64K document prefills in about 4.0 s, 61 µs a token, where an
// 8K prompt queued in a burst costs 0.124 s, 15 µs a token. A short
// chatbot's lone probe behind one document counted it as 7.95 of its own
// prompts and waited 3.5 s: read by tokens, its prompts ahead cost three
// times what its own burst said, its fit's intercept came out at −2.9 s,
// and the other use cases' costs per prompt ahead, lent to a document with
// no burst of its own, undercharged it by half. Where the engine pays a
// fixed part per prompt, short prompts cost more per token instead; either
// way the intercepts measure it.
type PrefillCost struct {
	// Tokens are the use cases' prompt lengths, ascending; PerToken the
	// seconds a token of a prompt that long costs.
	Tokens, PerToken []float64
}

// Costs is the prefill cost the use cases' own lone intercepts measure:
// those above the lag at their 95% limit, one per prompt length (the most
// precise), and none unless two lengths are known, which a single length
// cannot tell from the tokens' count.
func Costs(all []Slopes) PrefillCost {
	l := lag(all, 0)
	type knot struct{ tokens, perToken, se float64 }
	var ks []knot
	for _, s := range all {
		a := s.TTFTAlone
		if !(s.Prompt > 0) || !(a.SE > 0) || !(a.Value-a.T*a.SE > l) {
			continue
		}
		k := knot{s.Prompt, (a.Value - l) / s.Prompt, a.SE}
		if i := slices.IndexFunc(ks, func(o knot) bool { return o.tokens == k.tokens }); i >= 0 {
			if k.se < ks[i].se {
				ks[i] = k
			}
			continue
		}
		ks = append(ks, k)
	}
	if len(ks) < 2 {
		return PrefillCost{}
	}
	slices.SortFunc(ks, func(a, b knot) int { return cmp.Compare(a.tokens, b.tokens) })
	var out PrefillCost
	for _, k := range ks {
		out.Tokens, out.PerToken = append(out.Tokens, k.tokens), append(out.PerToken, k.perToken)
	}
	return out
}

// costSettled is how far apart two prefill costs may lie at any length and
// be one: the least scatter a latency is known to (resolution), so a level
// weighed by either is the same measurement.
const costSettled = resolution

// Settled says c is o within costSettled at every length: reading the
// slopes again with it would move nothing a level is counted by.
func (c PrefillCost) Settled(o PrefillCost) bool {
	if !slices.Equal(c.Tokens, o.Tokens) {
		return false
	}
	for i, v := range c.PerToken {
		if math.Abs(v-o.PerToken[i]) > costSettled*o.PerToken[i] {
			return false
		}
	}
	return true
}

// At is c's knots at the lengths in tokens only: the zero PrefillCost
// where fewer than two are left, which a single length cannot tell from
// the tokens' count.
func (c PrefillCost) At(tokens []float64) PrefillCost {
	var out PrefillCost
	for i, t := range c.Tokens {
		if slices.Contains(tokens, t) {
			out.Tokens, out.PerToken = append(out.Tokens, t), append(out.PerToken, c.PerToken[i])
		}
	}
	if len(out.Tokens) < 2 {
		return PrefillCost{}
	}
	return out
}

// Extrapolate is the cost three readings close on, each read with the one
// before (Aitken's Δ², per length): where each pass closes the same share
// of the gap, its limit; where the readings swing about a cost, the middle
// of the swing. A length keeps c's cost where the readings do not close
// (the gaps grow, or keep their side and size) or where the limit would
// not be a cost. The three must be at the same lengths.
func Extrapolate(a, b, c PrefillCost) PrefillCost {
	out := PrefillCost{Tokens: c.Tokens, PerToken: slices.Clone(c.PerToken)}
	for i := range out.PerToken {
		d1, d2 := b.PerToken[i]-a.PerToken[i], c.PerToken[i]-b.PerToken[i]
		if r := d2 / d1; r < 1 { // false for NaN: no gap before
			if v := c.PerToken[i] + d2*r/(1-r); v > 0 {
				out.PerToken[i] = v
			}
		}
	}
	return out
}

// perToken is the cost of a token of a prompt tokens long: between two
// measured lengths on the line through them (attention's cost per token
// grows as a line in the length), and beyond the measured ones the nearest
// one's, which no data past it can bend.
func (c PrefillCost) perToken(tokens float64) float64 {
	n := len(c.Tokens)
	switch {
	case tokens <= c.Tokens[0]:
		return c.PerToken[0]
	case tokens >= c.Tokens[n-1]:
		return c.PerToken[n-1]
	}
	i, _ := slices.BinarySearch(c.Tokens, tokens)
	f := (tokens - c.Tokens[i-1]) / (c.Tokens[i] - c.Tokens[i-1])
	return c.PerToken[i-1] + f*(c.PerToken[i]-c.PerToken[i-1])
}

// weigh is points with production's prompts in a probe's level counted by
// their prefill's cost over the probe's own prompt's (prompt tokens long),
// where the point says production's mean prompt (Point.Queued): a level's
// part beyond its burst is production's prompt tokens over the probe's
// prompt, and each of them costs perToken(queued) where the probe's cost
// perToken(prompt), within what physics allows. The points are points
// itself where nothing changes.
func (c PrefillCost) weigh(points []Point, prompt float64) []Point {
	if len(c.Tokens) == 0 || !(prompt > 0) || !slices.ContainsFunc(points, weighable) {
		return points
	}
	own := c.perToken(prompt)
	out := slices.Clone(points)
	for i := range out {
		p := &out[i]
		if !weighable(*p) {
			continue
		}
		// A prompt's prefill grows at least as its length and at most as
		// its square (attention over all of it): so a longer prompt costs
		// at least its tokens' share and at most that share again times
		// its length over the probe's, and a shorter one the reverse.
		r := p.Queued / prompt
		m := min(max(c.perToken(p.Queued)/own, min(1, r)), max(1, r))
		if p.Burst <= 1 {
			p.Level = 1 + (p.Level-1)*m
			continue
		}
		n := float64(p.Burst)
		p.Load = n + (p.Load-n)*m
	}
	return out
}

// weighable says whether a cost moves p's level (weigh): a probe's, not a
// bench cell's nor an engine reading's, that counted production's prompts
// ahead of it by their tokens (Point.Queued).
func weighable(p Point) bool {
	if !(p.Queued > 0) || math.IsInf(p.Queued, 0) || p.Cell > 0 || p.Engine {
		return false
	}
	if p.Burst <= 1 {
		return p.Level > 1
	}
	return p.Load > float64(p.Burst)
}
