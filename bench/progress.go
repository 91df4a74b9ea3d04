package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress reports a sweep's advance: a redrawn bar on a terminal, a plain
// line per cell otherwise (logs, CI). The ETA scales the plan's estimate of
// what is left by how the cells so far compared with theirs. A nil *Progress
// is silent.
type Progress struct {
	W       io.Writer
	TTY     bool
	Assumed Assumed

	plan            Plan
	cells, done     int
	left, doneGuess time.Duration // estimates
	spent           time.Duration
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

// Extra adds a cell the search decided on.
func (p *Progress) Extra(k Key) {
	if p == nil {
		return
	}
	p.cells++
	p.left += p.Assumed.Estimate(p.plan, k)
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
	eta := "?"
	if p.doneGuess > 0 {
		eta = time.Duration(float64(p.left) * float64(p.spent) / float64(p.doneGuess)).Round(time.Second).String()
	}
	if !p.TTY {
		fmt.Fprintf(p.W, "cell %d/%d %s took %s, eta %s\n", p.done, p.cells, k, took.Round(time.Millisecond), eta)
		return
	}
	const width = 30
	fill := width * p.done / max(1, p.cells)
	fmt.Fprintf(p.W, "\r\033[K[%s%s] %d/%d cells  %s  eta %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		p.done, p.cells, k, eta)
	if p.done == p.cells {
		fmt.Fprintln(p.W)
	}
}
