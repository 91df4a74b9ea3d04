package scripted

import (
	"math"
	"math/rand/v2"
)

// Production is background traffic internal to a server, no HTTP: closed-
// loop users, each sending a request of a mixed shape, then waiting a
// think time after it ends before the next. How many are active follows a
// slow sine from Low to High and back, over Period seconds from Phase
// (radians). Their requests count in the law and in /metrics as probes do.
type Production struct {
	Low, High     int
	Period, Phase float64
	Think         float64 // mean seconds between a user's request's end and its next
}

// level is how many users are active at t.
func (p *Production) level(t float64) int {
	s := (1 - math.Cos(2*math.Pi*t/p.Period+p.Phase)) / 2
	return p.Low + int(math.Round(float64(p.High-p.Low)*s))
}

// Shapes of production's requests: prompts log-uniform in this range,
// outputs uniform in that one; most shorter than the probes' contexts, as
// chat traffic is. recheck is how often an inactive user looks again.
const (
	prodPromptMin, prodPromptMax = 256, 16384
	prodOutputMin, prodOutputMax = 64, 512
	recheck                      = 10.0
)

// world is a law's engine with what happens to it besides probes: the
// production users and the restart. It is a value of pure state: cloned,
// it runs ahead to find when the next probe's token is due.
type world struct {
	law       *Law
	prod      *Production // nil: idle
	eng       machine
	pcg       rand.PCG // noise and production draws
	nextID    int64
	users     []user
	restarted bool
	buf       []event
}

type user struct {
	next float64 // when it next sends or looks again; +Inf while its request runs
	req  int64
}

func newWorld(l *Law, prod *Production) *world {
	w := &world{law: l, prod: prod, eng: newEngine(l, 0), pcg: *rand.NewPCG(l.Seed, 0x5eed)}
	if prod != nil {
		w.users = make([]user, prod.High)
		r := rand.New(&w.pcg)
		for i := range w.users {
			w.users[i].next = r.ExpFloat64() * prod.Think
		}
	}
	return w
}

func (w *world) clone() *world {
	c := *w
	c.eng = w.eng.clone()
	c.users = append([]user(nil), w.users...)
	c.buf = nil
	return &c
}

// add gives the engine a request with its noise drawn, at the engine's time.
func (w *world) add(prompt, output int, loud bool) int64 {
	w.nextID++
	r := w.noise(rand.New(&w.pcg))
	r.id, r.prompt, r.output, r.loud = w.nextID, prompt, output, loud
	w.eng.add(r)
	return w.nextID
}

// noise is a request with its noise factors drawn from g.
func (w *world) noise(g *rand.Rand) request {
	r := request{mT: 1, mI: 1}
	if l := w.law; l.Noise > 0 {
		r.mT, r.mI = math.Exp(l.Noise*g.NormFloat64()), math.Exp(l.Noise*g.NormFloat64())
		if g.Float64() < l.OutlierP {
			k := l.OutlierMin + (l.OutlierMax-l.OutlierMin)*g.Float64()
			r.mT, r.mI = r.mT*k, r.mI*k
		}
	}
	return r
}

func (w *world) next() float64 {
	n := w.eng.next()
	if w.law.RestartAt > 0 && !w.restarted {
		n = math.Min(n, w.law.RestartAt)
	}
	for _, u := range w.users {
		n = math.Min(n, u.next)
	}
	return n
}

// advance moves the world to time to and appends the loud requests'
// events.
func (w *world) advance(to float64, out []event) []event {
	for {
		n := w.next()
		if n > to {
			w.eng.advance(to, nil)
			return out
		}
		w.buf = w.eng.advance(n, w.buf[:0])
		for _, ev := range w.buf {
			switch {
			case ev.loud:
				out = append(out, ev)
			case ev.kind == finished:
				w.ended(ev.id, n)
			}
		}
		if w.law.RestartAt > 0 && !w.restarted && n >= w.law.RestartAt {
			out = w.restart(n, out)
		}
		for i := range w.users {
			if w.users[i].next <= n {
				w.send(i, n)
			}
		}
	}
}

// ended schedules the next request of the user whose request id ended.
func (w *world) ended(id int64, t float64) {
	for i, u := range w.users {
		if u.req == id {
			w.users[i] = user{next: t + rand.New(&w.pcg).ExpFloat64()*w.prod.Think}
		}
	}
}

// send has user i send a request at t if it is active, else look again later.
func (w *world) send(i int, t float64) {
	if i >= w.prod.level(t) {
		w.users[i].next = t + recheck
		return
	}
	g := rand.New(&w.pcg)
	prompt := int(prodPromptMin * math.Pow(prodPromptMax/prodPromptMin, g.Float64()))
	output := prodOutputMin + g.IntN(prodOutputMax-prodOutputMin+1)
	w.users[i] = user{next: math.Inf(1), req: w.add(prompt, output, false)}
}

// restart fails every request in flight and starts the engine afresh,
// counters at zero; users come back after the downtime.
func (w *world) restart(t float64, out []event) []event {
	for _, id := range w.eng.loud() {
		out = append(out, event{id, failed, t, true})
	}
	w.restarted = true
	w.eng = newEngine(w.law, t)
	g := rand.New(&w.pcg)
	for i := range w.users {
		w.users[i] = user{next: t + w.law.Downtime + g.ExpFloat64()*w.prod.Think}
	}
	return out
}

// firstLoud is when the next loud event happens if nothing new arrives,
// looked for up to limit: limit when none comes by then, +Inf when no
// loud request is in flight.
func (w *world) firstLoud(limit float64) float64 {
	if len(w.eng.loud()) == 0 {
		return math.Inf(1)
	}
	c := w.clone()
	var evs []event
	for {
		n := c.next()
		if n > limit {
			return limit
		}
		if evs = c.advance(n, evs[:0]); len(evs) > 0 {
			return n
		}
	}
}
