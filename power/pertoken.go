package power

import (
	"math"
	"time"
)

// PerToken derives energy per generated token from cumulative energy and
// generation-token counters: the energy delta of a target's GPUs over its
// engine's token delta across a window. It is pure: time comes in as values.
type PerToken struct {
	Window  time.Duration
	history map[string][]counterPoint
}

type counterPoint struct {
	t              time.Time
	joules, tokens float64
}

// NewPerToken keeps the given window per target.
func NewPerToken(window time.Duration) *PerToken {
	return &PerToken{Window: window, history: map[string][]counterPoint{}}
}

// Observe records a target's cumulative energy and token counters at t and
// returns joules per token over the window, NaN while either side is unknown,
// when no token was generated, or when a counter went backwards (a restart).
func (p *PerToken) Observe(target string, t time.Time, joules, tokens float64) float64 {
	h := p.history[target]
	if math.IsNaN(joules) || math.IsNaN(tokens) {
		delete(p.history, target)
		return math.NaN()
	}
	if n := len(h); n > 0 && (joules < h[n-1].joules || tokens < h[n-1].tokens) {
		h = nil
	}
	h = append(h, counterPoint{t, joules, tokens})
	for len(h) > 2 && t.Sub(h[1].t) >= p.Window {
		h = h[1:]
	}
	p.history[target] = h
	first := h[0]
	if dt := tokens - first.tokens; dt > 0 {
		return (joules - first.joules) / dt
	}
	return math.NaN()
}
