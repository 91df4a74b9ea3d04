package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Progress reports a sweep's advance: a redrawn bar on a terminal, a plain
// line per cell otherwise (logs, CI). The ETA scales the plan's estimate of
// what is left by how the cells so far compared with theirs. The search adds
// cells as results come in, so while it runs the ETA is its own: the cells
// its bracket may still need. A nil *Progress is silent.
type Progress struct {
	W       io.Writer
	TTY     bool
	Assumed Assumed

	plan            Plan
	cells, done     int
	left, doneGuess time.Duration // estimates
	spent           time.Duration
	search          *searchState
}

// searchState is where one use case's search stands.
type searchState struct {
	useCase     string
	lo, hi, max int // hi 0: no level has failed yet
}

// Start announces the cells to measure.
func (p *Progress) Start(plan Plan, todo []Key) {
	if p == nil {
		return
	}
	p.plan = plan
	for _, k := range todo {
		p.left += p.Assumed.Estimate(plan, k)
	}
	p.cells = len(todo)
}

// Search announces a cell the search of a use case decided on, with the
// bracket it narrows: lo passed, hi failed (0: none failed yet).
func (p *Progress) Search(useCase string, k Key, lo, hi, maxN int) {
	if p == nil {
		return
	}
	p.search = &searchState{useCase: useCase, lo: lo, hi: hi, max: maxN}
	p.cells++
}

// cellsLeft bounds the cells a search may still add after the one at n:
// doublings up to the first failure, then bisections down to adjacent levels.
func (s searchState) cellsLeft(n int) int {
	if s.hi == 0 { // n doubles: it fails (bisect below it) or passes (double on)
		if n >= s.max {
			return 0
		}
		doublings := int(math.Ceil(math.Log2(float64(s.max) / float64(n))))
		return max(bisections(s.lo, n), doublings+bisections(s.max/2, s.max))
	}
	return max(bisections(s.lo, n), bisections(n, s.hi)) // n bisects: either half is left
}

func bisections(lo, hi int) int {
	if hi-lo <= 1 {
		return 0
	}
	return int(math.Ceil(math.Log2(float64(hi - lo))))
}

// ratio is how much longer the cells so far took than their estimate.
func (p *Progress) ratio() float64 {
	if p.doneGuess <= 0 {
		return math.NaN()
	}
	return float64(p.spent) / float64(p.doneGuess)
}

func eta(d time.Duration, ratio float64) string {
	if math.IsNaN(ratio) {
		return "?"
	}
	return time.Duration(float64(d) * ratio).Round(time.Second).String()
}

// Done records a measured cell and prints where the sweep stands.
func (p *Progress) Done(k Key, took time.Duration) {
	if p == nil {
		return
	}
	guess := p.Assumed.Estimate(p.plan, k)
	p.done++
	p.spent += took
	p.doneGuess += guess
	p.left = max(0, p.left-guess)
	where := fmt.Sprintf("%d/%d cells", p.done, p.cells)
	left := "eta " + eta(p.left, p.ratio())
	if s := p.search; s != nil {
		n := s.cellsLeft(k.Concurrency)
		bracket := fmt.Sprintf("limit above %d", s.lo)
		if s.hi > 0 {
			bracket = fmt.Sprintf("limit between %d and %d", s.lo, s.hi)
		}
		where = fmt.Sprintf("search %s: %s", s.useCase, bracket)
		left = fmt.Sprintf("at most %d more cells, eta %s", n, eta(time.Duration(n)*guess, p.ratio()))
		p.search = nil
	}
	if !p.TTY {
		fmt.Fprintf(p.W, "%s: %s took %s; %s\n", where, k, took.Round(time.Millisecond), left)
		return
	}
	const width = 30
	fill := width * p.done / max(1, p.cells)
	fmt.Fprintf(p.W, "\r\033[K[%s%s] %s  %s  %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill), where, k, left)
	if p.done == p.cells {
		fmt.Fprintln(p.W)
	}
}
