package scripted

import (
	"math"
	"slices"
)

// eps absorbs floating-point error where progress is compared with a
// phase's end: an event due within it happens now.
const eps = 1e-9

// fluid runs a law whose requests progress at rates the state sets: a
// prefill works off its seconds at rate 1 (or 0 while it waits its turn),
// a decode emits tokens at one per interval. Rates change only at events,
// so an hour of production costs a few events per request, not one per
// token.
type fluid struct {
	law  *Law
	t    float64
	reqs []*freq // first come first served
	used int     // KV tokens held
	counters
}

type freq struct {
	request
	arrived  float64
	others   int     // other requests in flight at arrival, those arriving at the same instant included
	admitted bool    // holds its KV tokens
	work     float64 // prefill seconds left
	first    float64 // time of the first token, -1 before
	tokens   float64 // decoded, the first included; fractional while decoding
	emitted  int     // tokens delivered as events, for a loud request
	itl      float64 // interval between tokens, as of the last event
	rate     float64 // prefill progress per second, as of the last event
}

func (f *fluid) now() float64 { return f.t }

// add takes a request at the current time. Requests arriving at one
// instant all count one another as in flight at arrival: a burst sent
// together arrives together.
func (f *fluid) add(r request) {
	q := &freq{request: r, arrived: f.t, others: len(f.reqs), first: -1}
	for _, o := range f.reqs {
		if o.arrived == f.t {
			o.others++
			f.fix(o)
		}
	}
	f.fix(q)
	f.reqs = append(f.reqs, q)
	f.admit()
	f.refresh()
}

// fix sets what a request's arrival fixes: its prefill work, and its
// interval where the law fixes that at arrival.
func (f *fluid) fix(r *freq) {
	l := f.law
	r.work = (l.prefill(r.prompt) + l.TTFTPerOther*float64(r.others)) * r.mT
	if l.ITLAtArrival {
		r.itl = l.itl(r.prompt, r.others) * r.mI
	}
}

func (f *fluid) cancel(id int64) {
	i := slices.IndexFunc(f.reqs, func(r *freq) bool { return r.id == id })
	if i < 0 {
		return
	}
	f.remove(i)
	f.admit()
	f.refresh()
}

func (f *fluid) remove(i int) {
	r := f.reqs[i]
	if r.admitted {
		f.used -= r.prompt + r.output
	}
	f.reqs = slices.Delete(f.reqs, i, i+1)
}

// admit admits waiting requests first come first served while they fit.
func (f *fluid) admit() {
	for _, r := range f.reqs {
		if r.admitted {
			continue
		}
		if f.law.KVTokens > 0 && f.used+r.prompt+r.output > f.law.KVTokens {
			return
		}
		r.admitted = true
		f.used += r.prompt + r.output
	}
}

// refresh sets every request's rates from the state: called after each
// change, so that next and advance read them as they are until the next.
func (f *fluid) refresh() {
	running, head := 0, true
	for _, r := range f.reqs {
		r.rate = 0
		if r.admitted && r.first < 0 && (!f.law.SerialPrefill || head) {
			r.rate = 1
		}
		if r.admitted && r.first < 0 {
			head = false
		}
		if r.running() {
			running++
		}
	}
	if f.law.ITLAtArrival {
		return
	}
	for _, r := range f.reqs {
		if r.first >= 0 {
			r.itl = f.law.itl(r.prompt, running-1) * r.mI
		}
	}
}

// running: prefilling or decoding, as /metrics counts it; the rest wait.
func (r *freq) running() bool { return r.rate > 0 || r.first >= 0 }

// due is when a request's current phase ends: its prefill, or its next
// token if it is loud, else its last.
func (f *fluid) due(r *freq) float64 {
	switch {
	case !r.admitted:
		return math.Inf(1)
	case r.first < 0:
		if r.rate == 0 {
			return math.Inf(1)
		}
		return f.t + r.work/r.rate
	}
	target := float64(r.output)
	if r.loud {
		target = float64(r.emitted + 1)
	}
	return f.t + (target-r.tokens)*r.itl
}

func (f *fluid) next() float64 {
	n := math.Inf(1)
	for _, r := range f.reqs {
		n = math.Min(n, f.due(r))
	}
	return n
}

func (f *fluid) advance(to float64, evs []event) []event {
	for {
		n := f.next()
		if n > to || math.IsInf(n, 1) {
			f.progress(to)
			return evs
		}
		f.progress(n)
		evs = f.fire(evs)
		f.admit()
		f.refresh()
	}
}

// progress moves every request along at its rate to time t; each
// interval between tokens it completes is counted at its length.
func (f *fluid) progress(t float64) {
	dt := t - f.t
	f.t = t
	if dt <= 0 {
		return
	}
	for _, r := range f.reqs {
		switch {
		case r.first < 0:
			r.work -= dt * r.rate
		default:
			before := math.Floor(r.tokens + eps)
			r.tokens = math.Min(float64(r.output), r.tokens+dt/r.itl)
			if k := math.Floor(r.tokens+eps) - before; k > 0 {
				f.gen += k
				f.observe(k, r.itl)
			}
		}
	}
}

// fire ends the phases due now.
func (f *fluid) fire(evs []event) []event {
	for i := 0; i < len(f.reqs); i++ {
		r := f.reqs[i]
		if f.due(r) > f.t+eps {
			continue
		}
		if r.first < 0 {
			r.first, r.tokens, r.emitted, r.work = f.t, 1, 1, 0
			f.prompt += float64(r.prompt)
			f.gen++
			evs = append(evs, event{r.id, firstToken, f.t, r.loud})
		} else {
			r.tokens = math.Round(r.tokens)
			if r.loud {
				r.emitted++
				evs = append(evs, event{r.id, token, f.t, true})
			}
		}
		if r.tokens >= float64(r.output) {
			evs = append(evs, event{r.id, finished, f.t, r.loud})
			f.remove(i)
			i--
		}
	}
	return evs
}

func (f *fluid) loud() []int64 {
	var ids []int64
	for _, r := range f.reqs {
		if r.loud {
			ids = append(ids, r.id)
		}
	}
	return ids
}

func (f *fluid) reading() reading {
	g := reading{kvUsed: f.used, counters: f.counters}
	for _, r := range f.reqs {
		if r.running() {
			g.running++
		} else {
			g.waiting++
		}
	}
	return g
}

func (f *fluid) clone() machine {
	c := *f
	c.reqs = make([]*freq, len(f.reqs))
	for i, r := range f.reqs {
		q := *r
		c.reqs[i] = &q
	}
	return &c
}
