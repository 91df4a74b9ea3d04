package scripted

import (
	"fmt"
	"math"
	"strings"
)

// Law is the timing law of one scripted server of the generalization suite
// (issue 36): how long a request's prefill and each of its tokens take,
// given its prompt and what else the server holds. Times are in seconds.
// A law is run by one of two engines: a fluid one, where each request
// progresses at a rate the law sets from the state and the state changes
// only at events (arrivals, first tokens, ends), and a stepped one (Chunk >
// 0), where the engine runs steps shared by every request it holds.
type Law struct {
	Family string
	Seed   uint64

	// Prefill: a prompt of L tokens is Overhead + PrefillPerToken·L +
	// PrefillQuad·L² seconds of work (attention's quadratic term), plus
	// TTFTPerOther for each other request in flight when it arrived.
	Overhead, PrefillPerToken, PrefillQuad, TTFTPerOther float64
	// SerialPrefill: one prefill at a time, first come first served; the
	// prompts behind it wait, shown as waiting.
	SerialPrefill bool

	// Decode: the interval between two tokens of a request with a prompt
	// of L tokens is ITLBase + ITLPerKToken·L/1000 (reading its KV cache)
	// plus ITLSlope·x^ITLPower, x the other requests in flight when it
	// arrived (ITLAtArrival) or the other requests running at that moment.
	ITLBase, ITLPerKToken, ITLSlope, ITLPower float64
	ITLAtArrival                              bool

	// Experts > 0: a mixture of experts, each token routed to Active of
	// them. A decode step reads the weights of every expert one of its
	// batch's tokens was routed to, ExpertRead seconds each: a batch of b
	// touches Experts·(1 − (1 − Active/Experts)^b) of them on average, so
	// the step grows steeply over the first sequences and levels off once
	// every expert is read. A lone request's Active experts are in
	// ITLBase; the interval adds the experts the others bring.
	Experts, Active int
	ExpertRead      float64

	// KVTokens > 0: a KV cache of that many tokens, in blocks of
	// BlockSize. A request holds its prompt and output tokens from its
	// admission to its end; requests are admitted first come first served
	// while they fit, and wait in the queue (shown as waiting) otherwise.
	KVTokens, BlockSize int

	// Chunk > 0: the stepped engine. A step takes StepBase, plus StepPerSeq
	// and ITLPerKToken per 1000 tokens of context for each decoding
	// sequence (each gets a token at the step's end), plus the prefill of
	// at most Chunk prompt tokens, packed first come first served, at
	// PrefillPerToken and PrefillQuad. Alone, a prompt takes ceil(L/Chunk)
	// steps; its first token comes at the end of the last.
	Chunk                int
	StepBase, StepPerSeq float64

	// Noise multiplies each request's prefill and its interval between
	// tokens by lognormal factors of this sigma; with probability
	// OutlierP, both also by a factor drawn from OutlierMin..OutlierMax.
	Noise, OutlierP, OutlierMin, OutlierMax float64

	// RestartAt > 0: the server restarts that many seconds after it
	// started. Requests in flight fail, its counters start again from zero
	// and it answers nothing for Downtime seconds; the law is the same after.
	RestartAt, Downtime float64

	// ITLHistogram: /metrics carries vllm:inter_token_latency_seconds over
	// every request, as vLLM's does.
	ITLHistogram bool
}

// prefill is a lone prompt's prefill work, in seconds.
func (l *Law) prefill(prompt int) float64 {
	L := float64(prompt)
	return l.Overhead + l.PrefillPerToken*L + l.PrefillQuad*L*L
}

// itl is the interval between tokens with x other requests counted.
func (l *Law) itl(prompt, x int) float64 {
	d := l.ITLBase + l.ITLPerKToken*float64(prompt)/1000
	if x > 0 && l.ITLSlope > 0 {
		d += l.ITLSlope * math.Pow(float64(x), l.ITLPower)
	}
	if l.Experts > 0 {
		d += l.ExpertRead * (l.touched(x+1) - l.touched(1))
	}
	return d
}

// touched is how many experts a batch of b tokens reads on average, each
// token routed to Active of Experts at random.
func (l *Law) touched(b int) float64 {
	e := float64(l.Experts)
	return e * (1 - math.Pow(1-float64(l.Active)/e, float64(b)))
}

// down says whether the server is restarting at t.
func (l *Law) down(t float64) bool {
	return l.RestartAt > 0 && t >= l.RestartAt && t < l.RestartAt+l.Downtime
}

// fits says whether a request can ever be admitted.
func (l *Law) fits(prompt, output int) bool {
	return l.KVTokens == 0 || prompt+output <= l.KVTokens
}

// String lists the law's parameters, in ms and tokens where those read better.
func (l Law) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d: prefill %.0f ms + %.0f tok/s", l.Family, l.Seed, 1000*l.Overhead, 1/l.PrefillPerToken)
	if l.PrefillQuad > 0 {
		fmt.Fprintf(&b, " + %.2f s at 64K²", l.PrefillQuad*65536*65536)
	}
	if l.TTFTPerOther > 0 {
		fmt.Fprintf(&b, ", TTFT +%.0f ms per other at arrival", 1000*l.TTFTPerOther)
	}
	if l.SerialPrefill {
		b.WriteString(", one prefill at a time")
	}
	if l.Chunk > 0 {
		fmt.Fprintf(&b, ", steps of %.1f ms + %.2f ms per sequence, chunk %d", 1000*l.StepBase, 1000*l.StepPerSeq, l.Chunk)
	} else {
		when := "now"
		if l.ITLAtArrival {
			when = "at arrival"
		}
		fmt.Fprintf(&b, ", ITL %.1f ms + %.3f ms/1K tokens + %.2f ms·x^%.2f (x others %s)", 1000*l.ITLBase, 1000*l.ITLPerKToken, 1000*l.ITLSlope, l.ITLPower, when)
	}
	if l.Experts > 0 {
		fmt.Fprintf(&b, ", %d experts, %d per token, %.3f ms each", l.Experts, l.Active, 1000*l.ExpertRead)
	}
	if l.KVTokens > 0 {
		fmt.Fprintf(&b, ", KV %d tokens", l.KVTokens)
	}
	if l.Noise > 0 {
		fmt.Fprintf(&b, ", noise σ %.2f, %.0f%% outliers %.0f-%.0fx", l.Noise, 100*l.OutlierP, l.OutlierMin, l.OutlierMax)
	}
	if l.RestartAt > 0 {
		fmt.Fprintf(&b, ", restart at %.1f min for %.0f s", l.RestartAt/60, l.Downtime)
	}
	return b.String()
}

// request is what an engine is given: a request and its noise factors.
type request struct {
	id             int64
	prompt, output int
	loud           bool    // its every token is an event, not only its first and its end
	mT, mI         float64 // noise factors of its prefill and of its intervals
}

type kind int

const (
	firstToken kind = iota
	token
	finished
	failed // the server restarted under it
)

// event is one thing that happened to a request. Engines report every
// request's first token and end, and a loud request's every token.
type event struct {
	id   int64
	kind kind
	t    float64
	loud bool
}

// counters are what /metrics counts, since the server (re)started.
type counters struct {
	prompt, gen      float64 // prompt tokens as each prefill completes, tokens generated
	itlCount, itlSum float64 // the intervals between tokens of every request
	// itlBucket counts the intervals at most itlBuckets[i] long and longer
	// than the one before; the last, longer than all.
	itlBucket [len(itlBuckets) + 1]float64
}

// itlBuckets are the classic buckets of the inter-token histogram, seconds.
var itlBuckets = [...]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1}

// observe counts k intervals between tokens of d seconds each.
func (c *counters) observe(k, d float64) {
	c.itlCount += k
	c.itlSum += k * d
	i := 0
	for i < len(itlBuckets) && d > itlBuckets[i] {
		i++
	}
	c.itlBucket[i] += k
}

// reading is the engine's state as /metrics shows it.
type reading struct {
	running, waiting int
	kvUsed           int // tokens held
	counters
}

// machine runs a law in virtual time. Its clock moves only by advance; add
// and cancel act at its current time.
type machine interface {
	now() float64
	// next is when the next event happens, +Inf when none will.
	next() float64
	// advance moves the clock to to (at most next() or any later time)
	// and appends the events that happened up to it.
	advance(to float64, evs []event) []event
	add(r request)
	cancel(id int64)
	// loud lists the loud requests it holds.
	loud() []int64
	reading() reading
	clone() machine
}

func newEngine(l *Law, t float64) machine {
	if l.Chunk > 0 {
		return &stepped{law: l, t: t}
	}
	return &fluid{law: l, t: t}
}
