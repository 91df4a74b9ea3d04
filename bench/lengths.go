package bench

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
)

// lengths draws each request's prompt and output lengths around a cell's:
// log-normal with the cell's length as mean and the plan's spread as the
// coefficient of variation, clamped to a quarter to twice the mean, seeded by
// the plan's seed and the cell so that a rerun sends the same lengths.
// Prompt lengths are rounded to 1/32 of the mean: each length drawn is sized
// with the server's tokenizer once, so they are kept to a few dozen.
type lengths struct {
	mu                  sync.Mutex
	rng                 *rand.Rand
	input, output       int
	inSpread, outSpread float64
}

// newLengths returns nil when the plan draws no lengths: every request is the cell's.
func newLengths(p Plan, k Key) *lengths {
	if p.InputSpread <= 0 && p.OutputSpread <= 0 {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("lengths " + k.String()))
	return &lengths{rng: rand.New(rand.NewPCG(p.Seed, h.Sum64())), input: k.Context, output: k.Output,
		inSpread: p.InputSpread, outSpread: p.OutputSpread}
}

// draw returns the next request's prompt and output tokens.
func (l *lengths) draw() (input, output int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	step := max(1, l.input/32)
	return max(1, (l.one(l.input, l.inSpread, 1)+step/2)/step*step), l.one(l.output, l.outSpread, 2)
}

func (l *lengths) one(mean int, cv float64, least int) int {
	if cv <= 0 {
		return mean
	}
	sigma := math.Sqrt(math.Log1p(cv * cv))
	v := float64(mean) * math.Exp(sigma*l.rng.NormFloat64()-sigma*sigma/2)
	return max(least, int(math.Round(math.Min(2*float64(mean), math.Max(float64(mean)/4, v)))))
}
