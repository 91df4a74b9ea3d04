package sim

import "github.com/headroom-dev/headroom/capacity"

// Cell is what a benchmark measures at one context length and concurrency:
// means over every request of the cell.
type Cell struct {
	Context, Output, Concurrency int
	Requests                     int
	TTFT, E2E, ITL, Decode       float64 // seconds, seconds, seconds, tok/s per user
	Throughput                   float64 // system output tok/s
	QueueWait, Prefill           float64 // seconds, prompt tok/s per user
}

type reqState struct {
	start, first, last float64
}

// run drives an engine in virtual time until every request is done: initial
// requests at once, then one more as each finishes until total were sent.
func run(p Params, context, output, initial, total int) Cell {
	e := NewEngine(p)
	st := map[int64]*reqState{}
	var id int64
	submitted := 0
	submit := func() {
		id++
		submitted++
		st[id] = &reqState{start: e.Now()}
		_ = e.Submit(id, context, output)
	}
	for range initial {
		submit()
	}
	c := Cell{Context: context, Output: output, Concurrency: initial}
	emit := func(rid int64, k EventKind, t float64) {
		r := st[rid]
		switch k {
		case FirstToken:
			r.first, r.last = t, t
		case Token:
			r.last = t
		case Finished:
			ttft := r.first - r.start
			c.TTFT += ttft
			c.E2E += r.last - r.start
			if output > 1 && r.last > r.first {
				c.Decode += float64(output-1) / (r.last - r.first)
				c.ITL += (r.last - r.first) / float64(output-1)
			}
			c.Prefill += float64(context) / ttft
			c.Requests++
			delete(st, rid)
			if submitted < total {
				submit()
			}
		}
	}
	for !e.Idle() {
		if e.Step(emit) == 0 {
			e.AdvanceTo(e.NextWake())
		}
	}
	n := float64(c.Requests)
	c.TTFT /= n
	c.E2E /= n
	c.ITL /= n
	c.Decode /= n
	c.Prefill /= n
	c.Throughput = float64(c.Requests*output) / e.Now()
	if e.QueueCount > 0 {
		c.QueueWait = e.QueueSum / e.QueueCount
	}
	return c
}

// Rounds is how many requests each slot of a closed loop serves. All slots
// start together and every round is measured: the reports' TTFTs under load
// carry the waves such a start makes (discarding the first round fitted
// reports 000 and 002 worse).
const Rounds = 2

// Closed runs a closed loop: exactly n requests in flight, each finished request
// replaced at once, Rounds requests per slot.
func Closed(p Params, context, output, n int) Cell { return run(p, context, output, n, n*Rounds) }

// Burst sends n requests at once and nothing after (report 004's queue mode).
func Burst(p Params, context, output, n int) Cell { return run(p, context, output, n, n) }

// Limit finds the largest concurrency in 1..maxN at which margin(n) >= 0, as
// capacity.Search does for a benchmark.
func Limit(maxN int, margin func(n int) float64) (limit float64, capped bool) {
	limit, capped, _ = capacity.Search(maxN, func(n int) (float64, error) { return margin(n), nil })
	return limit, capped
}
