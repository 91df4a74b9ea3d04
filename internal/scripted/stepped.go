package scripted

import (
	"math"
	"slices"
)

// stepped runs a law of engine steps (Law.Chunk): every step prefills up
// to a chunk of prompt tokens and decodes one token of every sequence past
// its prefill. What a step does is fixed when it starts: a request that
// arrives during it waits for the next. It is fixed lazily, once the clock
// moves past the step's start, so that requests arriving at the instant a
// step starts join it.
type stepped struct {
	law     *Law
	t       float64 // start of the step under way (or of idleness)
	reqs    []*sreq // first come first served
	planned bool    // the step from t is fixed: its chunks and decoders are marked
	dur     float64 // its length, once planned
	counters
}

type sreq struct {
	request
	filled int  // prompt tokens prefilled
	tokens int  // emitted, the first included
	chunk  int  // prompt tokens it prefills in the planned step
	decode bool // it decodes in the planned step
	gone   bool // cancelled during the planned step
}

func (s *stepped) now() float64 { return s.t }

func (s *stepped) add(r request) { s.reqs = append(s.reqs, &sreq{request: r}) }

func (s *stepped) cancel(id int64) {
	if i := slices.IndexFunc(s.reqs, func(r *sreq) bool { return r.id == id }); i >= 0 {
		s.reqs[i].gone = true
	}
}

// cost is the prefill of prompt tokens [a, b): a prompt's chunks add up
// to its lone prefill work less the overhead, PrefillPerToken·L +
// PrefillQuad·L², a token costing more the longer the prefix it attends to.
func (s *stepped) cost(a, b int) float64 {
	return s.law.PrefillPerToken*float64(b-a) + s.law.PrefillQuad*(float64(b)*float64(b)-float64(a)*float64(a))
}

// compose is the length of the step from now, +Inf when there is nothing
// to do; mark fixes it.
func (s *stepped) compose(mark bool) float64 {
	l := s.law
	budget, dur, work := l.Chunk, l.StepBase, false
	for _, r := range s.reqs {
		switch {
		case r.gone:
		case r.filled < r.prompt:
			if budget == 0 {
				continue
			}
			n := min(budget, r.prompt-r.filled)
			budget -= n
			dur += s.cost(r.filled, r.filled+n)
			if r.filled == 0 {
				dur += l.Overhead
			}
			work = true
			if mark {
				r.chunk = n
			}
		default:
			dur += l.StepPerSeq + l.ITLPerKToken*float64(r.prompt+r.tokens)/1000
			work = true
			if mark {
				r.decode = true
			}
		}
	}
	if !work {
		return math.Inf(1)
	}
	return dur
}

func (s *stepped) next() float64 {
	if s.planned {
		return s.t + s.dur
	}
	return s.t + s.compose(false)
}

func (s *stepped) advance(to float64, evs []event) []event {
	for {
		if !s.planned {
			d := s.compose(false)
			if math.IsInf(d, 1) {
				s.reqs = slices.DeleteFunc(s.reqs, func(r *sreq) bool { return r.gone })
				s.t = math.Max(s.t, to)
				return evs
			}
			if to <= s.t {
				return evs
			}
			s.dur, s.planned = s.compose(true), true
		}
		end := s.t + s.dur
		if end > to {
			return evs
		}
		evs = s.finish(end, evs)
	}
}

// finish ends the planned step at t.
func (s *stepped) finish(t float64, evs []event) []event {
	for _, r := range s.reqs {
		if r.gone {
			continue
		}
		switch {
		case r.chunk > 0:
			r.filled += r.chunk
			if r.filled == r.prompt {
				r.tokens = 1
				s.prompt += float64(r.prompt)
				s.gen++
				evs = append(evs, event{r.id, firstToken, t, r.loud})
			}
		case r.decode:
			r.tokens++
			s.gen++
			s.observe(1, s.dur)
			if r.loud {
				evs = append(evs, event{r.id, token, t, true})
			}
		default:
			continue
		}
		if r.tokens >= r.output {
			evs = append(evs, event{r.id, finished, t, r.loud})
			r.gone = true
		}
		r.chunk, r.decode = 0, false
	}
	s.reqs = slices.DeleteFunc(s.reqs, func(r *sreq) bool { return r.gone })
	s.t, s.planned = t, false
	return evs
}

func (s *stepped) loud() []int64 {
	var ids []int64
	for _, r := range s.reqs {
		if r.loud && !r.gone {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// reading counts a request as running once its prefill has begun.
func (s *stepped) reading() reading {
	g := reading{counters: s.counters}
	for _, r := range s.reqs {
		switch {
		case r.gone:
		case r.filled > 0 || r.chunk > 0:
			g.running++
		default:
			g.waiting++
		}
	}
	return g
}

func (s *stepped) clone() machine {
	c := *s
	c.reqs = make([]*sreq, len(s.reqs))
	for i, r := range s.reqs {
		q := *r
		c.reqs[i] = &q
	}
	return &c
}
