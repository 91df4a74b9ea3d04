package scripted

import (
	"math"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/sim"
)

// Cell is what a closed loop of a law gives: means over its requests.
type Cell struct {
	TTFT, E2E, ITL float64 // seconds; ITL (last token - first)/(output-1)
	Decode         float64 // tokens per second per request, (output-1)/(last token - first)
}

// Closed runs the law's own engine, no HTTP and no headroom, in a closed
// loop as the reference reports measure: n requests of prompt and output
// tokens sent together at time 0, each replaced the instant it ends, until
// sim.Rounds requests per slot have been sent; the means are over all of
// them. Noise enters as its expectation: the engine runs without it, and
// the means are scaled by the noise's mean factors. That is exact where a
// request's times are fixed at its arrival from the requests in flight
// then (the noise family's law), as in a closed loop every request meets
// the same n-1 others whatever the others' times; for a law where one
// request's time moves another's, the scaling would be an approximation.
func (l Law) Closed(prompt, output, n int) Cell {
	quiet := l
	quiet.Noise, quiet.OutlierP = 0, 0
	e := newEngine(&quiet, 0)
	type times struct{ start, first float64 }
	reqs := map[int64]*times{}
	var id int64
	send := func() {
		id++
		reqs[id] = &times{start: e.now()}
		e.add(request{id: id, prompt: prompt, output: output, mT: 1, mI: 1})
	}
	for range n {
		send()
	}
	var c Cell
	done, total := 0, n*sim.Rounds
	var evs []event
	for done < total {
		evs = e.advance(e.next(), evs[:0])
		for _, ev := range evs {
			r := reqs[ev.id]
			switch ev.kind {
			case firstToken:
				r.first = ev.t
			case finished:
				c.TTFT += r.first - r.start
				c.E2E += ev.t - r.start
				if output > 1 {
					c.Decode += float64(output-1) / (ev.t - r.first)
					c.ITL += (ev.t - r.first) / float64(output-1)
				}
				delete(reqs, ev.id)
				if done++; int(id) < total {
					send()
				}
			}
		}
	}
	c.TTFT /= float64(total)
	c.E2E /= float64(total)
	c.Decode /= float64(total)
	c.ITL /= float64(total)
	if l.Noise > 0 {
		m, inv := l.noiseMeans()
		c.TTFT *= m
		c.E2E *= m
		c.ITL *= m
		c.Decode *= inv
	}
	return c
}

// noiseMeans are E[m] and E[1/m] of the noise's factor m = lognormal(σ)·k,
// k an outlier's factor (uniform) or 1: the first scales the mean times,
// the second the mean speed.
func (l Law) noiseMeans() (m, inv float64) {
	lognormal := math.Exp(l.Noise * l.Noise / 2)
	k := (1 - l.OutlierP) + l.OutlierP*(l.OutlierMin+l.OutlierMax)/2
	invK := (1 - l.OutlierP) + l.OutlierP*math.Log(l.OutlierMax/l.OutlierMin)/(l.OutlierMax-l.OutlierMin)
	return lognormal * k, lognormal * invK
}

// maxTruth is the largest concurrency a truth is searched to; past it the
// capacity is +Inf. The families are drawn to stay well below.
const maxTruth = 1024

// Truth is the law's capacity for a use case whose requests have prompt
// and output tokens, by the reports' definition: the largest n whose
// closed loop (Closed) meets every threshold, interpolated linearly in the
// margin between the last passing and the first failing n (capacity.Search
// does that step). A restart leaves the law as it was, so it leaves the
// truth too. +Inf when no n up to maxTruth fails.
func (l Law) Truth(prompt, output int, u config.UseCase) float64 {
	limit, capped, _ := capacity.Search(maxTruth, func(n int) (float64, error) {
		m, _ := Margin(l.Closed(prompt, output, n), u)
		return m, nil
	})
	if capped {
		return math.Inf(1)
	}
	return limit
}

// Margin is a cell's smallest margin to the use case's thresholds,
// (threshold - value)/threshold for a maximum and (value -
// threshold)/threshold for a minimum, negative where one breaks, and the
// threshold it is to (capacity.SLO's names).
func Margin(c Cell, u config.UseCase) (float64, string) {
	m, name := math.Inf(1), ""
	check := func(n string, margin float64) {
		if margin < m {
			m, name = margin, n
		}
	}
	upTo := func(n string, v float64, max time.Duration) {
		if max > 0 {
			check(n, (max.Seconds()-v)/max.Seconds())
		}
	}
	upTo("ttft_seconds", c.TTFT, u.TTFTMax)
	upTo("e2e_seconds", c.E2E, u.E2EMax)
	upTo("itl_seconds", c.ITL, u.ITLMax)
	if u.DecodeMinTPS > 0 {
		check("decode_tokens_per_second", (c.Decode-u.DecodeMinTPS)/u.DecodeMinTPS)
	}
	return m, name
}
