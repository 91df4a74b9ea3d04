package probe

import (
	"context"
	"fmt"
	"math"
)

// Tolerance is how far a prompt may miss its target token count, or
// minSlack tokens where that is more: below 400 tokens, 1% is less than the
// one filler word a prompt can grow or shrink by.
const (
	Tolerance = 0.01
	minSlack  = 4
)

// Sizer finds how many filler words make a prompt of the target token count for
// one target's tokenizer and chat template. It models count = overhead + ratio*words,
// fits that with a counter where one exists, and corrects it from the server's own
// usage.prompt_tokens after every probe.
type Sizer struct {
	target   int
	ratio    float64 // tokens per filler word
	overhead float64 // nonce, instruction and chat template
	words    int
	// lastWords, lastTokens: the previous observation, for a secant re-fit of the ratio.
	lastWords, lastTokens int
}

// Bounds of the fit. The filler is common English words: no tokenizer
// counts them at under 0.2 or over 8 tokens a word, and nothing but a chat
// template and a nonce precedes them (a fit may put the overhead a little
// below zero, never a quarter of the target). A server whose usage counts
// fall outside these is misreporting, and the fit must not follow it to a
// prompt of hundreds of thousands of tokens: at the bounds, a prompt has at
// most (1.25 target)/0.2 words.
const (
	minRatio, maxRatio = 0.2, 8.0
	maxOverhead        = 4096
)

// NewSizer starts from a typical BPE ratio; Calibrate or Observe refine it.
func NewSizer(target int) *Sizer {
	s := &Sizer{target: target, ratio: 1.2, overhead: 24}
	s.solve()
	return s
}

// Words is how many filler words to send.
func (s *Sizer) Words() int { return s.words }

func (s *Sizer) solve() {
	limit := int(1.25 * float64(s.target) / minRatio)
	s.words = min(limit, max(1, int(math.Round((float64(s.target)-s.overhead)/s.ratio))))
}

// bound holds a fit from usage feedback within what a tokenizer can do.
func (s *Sizer) bound() {
	s.ratio = min(maxRatio, max(minRatio, s.ratio))
	s.overhead = min(maxOverhead, max(-float64(s.target)/4, s.overhead))
}

// Calibrate fits the model with a counter: two counts give ratio and overhead,
// then secant steps until the count is within half the tolerance.
func (s *Sizer) Calibrate(ctx context.Context, c Counter, nonce string) error {
	count := func(w int) (int, error) { return c.Count(ctx, PromptText(nonce, w)) }
	w0 := max(1, s.words/2)
	n0, err := count(w0)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	w1 := s.words
	for range 6 {
		n1, err := count(w1)
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		if w1 != w0 {
			s.ratio = float64(n1-n0) / float64(w1-w0)
			s.overhead = float64(n1) - s.ratio*float64(w1)
		}
		s.solve()
		if within(n1, s.target, Tolerance/2) && s.words == w1 {
			return nil
		}
		w0, n0, w1 = w1, n1, s.words
	}
	return nil
}

// shortWords are the prompt lengths of a cheap calibration.
var shortWords = [2]int{200, 600}

// CalibrateShort fits the model from two short prompts only, for counters
// that cost a prefill each; Observe then corrects it at full length.
func (s *Sizer) CalibrateShort(ctx context.Context, c Counter, nonce string) error {
	var n [2]int
	for i, w := range shortWords {
		v, err := c.Count(ctx, PromptText(nonce, w))
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		n[i] = v
	}
	s.ratio = float64(n[1]-n[0]) / float64(shortWords[1]-shortWords[0])
	s.overhead = float64(n[1]) - s.ratio*float64(shortWords[1])
	s.bound()
	s.solve()
	return nil
}

// Observe takes the prompt token count the server reported for a probe of
// Words() words and re-fits the overhead when the count drifted out of tolerance.
// It reports whether it drifted.
func (s *Sizer) Observe(words, promptTokens int) bool {
	if promptTokens <= 0 {
		return false
	}
	prevW, prevN := s.lastWords, s.lastTokens
	s.lastWords, s.lastTokens = words, promptTokens
	if within(promptTokens, s.target, Tolerance) {
		return false
	}
	if prevW > 0 && prevW != words && prevN != promptTokens {
		s.ratio = float64(promptTokens-prevN) / float64(words-prevW)
	}
	s.overhead = float64(promptTokens) - s.ratio*float64(words)
	s.bound()
	s.solve()
	return true
}

// within: got is within tol of want, or within minSlack tokens scaled as
// tol is to Tolerance (calibration aims at half of both).
func within(got, want int, tol float64) bool {
	return math.Abs(float64(got-want)) <= max(tol*float64(want), minSlack*tol/Tolerance)
}
