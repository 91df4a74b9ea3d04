package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Pattern is the number of concurrent background users at virtual time t.
type Pattern interface {
	Users(t float64) int
}

// Daily is a day of traffic compressed into Period virtual seconds: a trough
// of Min users at t=0 rising to Max at mid-period.
type Daily struct {
	Min, Max int
	Period   float64
}

// Users implements Pattern.
func (d Daily) Users(t float64) int {
	return d.Min + int(math.Round(float64(d.Max-d.Min)*0.5*(1-math.Cos(2*math.Pi*t/d.Period))))
}

// Steps holds each level for Hold virtual seconds, then cycles.
type Steps struct {
	Levels []int
	Hold   float64
}

// Users implements Pattern.
func (s Steps) Users(t float64) int {
	i := int(t/s.Hold) % len(s.Levels)
	return s.Levels[i]
}

// Rising holds Start users for Hold virtual seconds, then adds Growth of
// them each virtual minute, compounded: a morning's ramp after a steady
// night, the load an autoscaler has to get ahead of.
type Rising struct {
	Start  int
	Hold   float64
	Growth float64 // per minute: 0.01 is 1% a minute
}

// Users implements Pattern.
func (r Rising) Users(t float64) int {
	if t <= r.Hold {
		return r.Start
	}
	return int(math.Round(float64(r.Start) * math.Pow(1+r.Growth, (t-r.Hold)/60)))
}

// Shape is one kind of request in a traffic mix.
type Shape struct {
	Context, Output int
	Weight          float64
}

// DefaultMix mixes the reference use cases' contexts, short ones most often.
var DefaultMix = []Shape{{1024, 128, 0.3}, {8192, 512, 0.3}, {32768, 512, 0.25}, {65536, 512, 0.1}, {98304, 1024, 0.05}}

func pick(r *rand.Rand, mix []Shape) Shape {
	total := 0.0
	for _, m := range mix {
		total += m.Weight
	}
	x := r.Float64() * total
	for _, m := range mix {
		if x -= m.Weight; x < 0 {
			return m
		}
	}
	return mix[len(mix)-1]
}

// RunLoad carries background traffic on the server until ctx ends: pattern
// decides how many users are active; each sends a request from mix, waits for
// it to finish and sends the next while its slot is still wanted.
func (s *Server) RunLoad(ctx context.Context, pattern Pattern, mix []Shape, seed uint64) {
	s.RunLoadObserved(ctx, pattern, mix, seed, nil)
}

// Request is what one background user's request got, in virtual seconds
// since the server started: the latencies its user saw, which the engine's
// own histograms mix with every other client's (a prober's included).
type Request struct {
	Submitted, FirstToken, Finished float64
	Prompt, Tokens                  int // prompt tokens, tokens generated
}

// TTFT is the time to its first token.
func (r Request) TTFT() float64 { return r.FirstToken - r.Submitted }

// E2E is the time to its end.
func (r Request) E2E() float64 { return r.Finished - r.Submitted }

// ITL is its mean inter-token latency: the decode's time over the gaps
// between its tokens, 0 with fewer than two (probe.Result's definition).
func (r Request) ITL() float64 {
	if r.Tokens < 2 {
		return 0
	}
	return (r.Finished - r.FirstToken) / float64(r.Tokens-1)
}

// DecodeTPS is its decode speed, 1/ITL (0 with fewer than two tokens).
func (r Request) DecodeTPS() float64 {
	if r.Tokens < 2 || r.Finished <= r.FirstToken {
		return 0
	}
	return float64(r.Tokens-1) / (r.Finished - r.FirstToken)
}

// RunLoadObserved is RunLoad that calls observe (when not nil), from the
// users' goroutines, with each request that finished: production's own
// latencies, as its users measured them. A request abandoned when its user
// left is not observed.
func (s *Server) RunLoadObserved(ctx context.Context, pattern Pattern, mix []Shape, seed uint64, observe func(Request)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	active := map[int]context.CancelFunc{}
	tick := time.NewTicker(max(10*time.Millisecond, time.Duration(float64(time.Second)/s.scale)))
	defer tick.Stop()
	for {
		want := pattern.Users(s.vnow())
		for i := len(active); i < want; i++ {
			uctx, cancel := context.WithCancel(ctx)
			active[i] = cancel
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			wg.Go(func() { s.user(uctx, r, mix, observe) })
		}
		for i := len(active) - 1; i >= want; i-- {
			active[i]() // the user leaves, abandoning its request
			delete(active, i)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// arrivalSpread is how long, in virtual seconds, users who join together
// take to send their first requests. Users of production arrive
// independently; sent at one instant, a level's requests would run in
// lock-step waves that no server meets.
const arrivalSpread = 30.0

func (s *Server) user(ctx context.Context, r *rand.Rand, mix []Shape, observe func(Request)) {
	t := time.NewTimer(time.Duration(r.Float64() * arrivalSpread / s.scale * float64(time.Second)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	for ctx.Err() == nil {
		sh := pick(r, mix)
		id, lr, err := s.submit(s.vnow(), sh.Context, sh.Output, true)
		if err != nil {
			return
		}
		if s.wait(ctx, id, lr, nil) && observe != nil {
			observe(Request{Submitted: lr.submitted, FirstToken: lr.first, Finished: lr.end, Prompt: sh.Context, Tokens: lr.tokens})
		}
	}
}
