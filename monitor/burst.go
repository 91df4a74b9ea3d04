package monitor

import (
	"math"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/engine"
)

// burstLevel is the requests n probes sent together (a lone probe: n = 1)
// competed with for prefill (BurstLevel): the prefill the engine did from
// before they were sent until their last first token, in their prompts;
// queued is the mean prompt of production's requests (0 or NaN: not known).
func burstLevel(samples []Sample, n int, before engine.Load, beforeOK bool, prefill *prefillLog, start time.Time, inputTokens int, queued float64) float64 {
	if !beforeOK {
		return math.NaN()
	}
	var last time.Duration
	prompt, counted := 0.0, 0
	for _, s := range samples {
		last = max(last, s.Result.TTFT)
		if s.Result.PromptTokens > 0 {
			prompt += float64(s.Result.PromptTokens)
			counted++
		}
	}
	if counted > 0 {
		prompt /= float64(counted) // the server's count, as its counter's
	} else {
		prompt = float64(inputTokens)
	}
	done := math.NaN()
	if prefill != nil {
		// The probes' times are a time-scaled simulator's (Result.Scaled),
		// the counter's readings the wall's: read at the wall time of the
		// last first token. Read at its simulated time, ten times later on
		// the demo's simulator, the counter had no reading yet, and no
		// burst of the demo's saw the prefill it competed with.
		done = prefill.at(start.Add(time.Duration(float64(last)/max(before.TimeScale, 1)))) - before.PrefilledTokens
	}
	return BurstLevel(n, before.Waiting, done, prompt, queued)
}

// BurstLevel is the load of a burst of n probes of prompt tokens each: the
// requests that competed with it for prefill, itself included. A benchmark
// cell of N requests sent together prefills N prompts before its last first
// token; a burst amid production also waits for the requests queued when it
// was sent and those arriving while it prefills, and each counts by its share
// of that work (prefilled, the prompt tokens the engine prefilled from just
// before the burst until its last first token). Requests running past their
// prefill count not at all: they delay a prefill far less.
//
// The count of prompts is read between the engine's readings, seconds
// apart, and lags a burst shorter than that: report 002's simulator had
// counted 0.3 to 0.8 of a burst's own short prompts by its last first
// token. So the level is never below the burst and the requests queued
// when it was sent (waiting), each queued one by its share of the work
// too: production's mean prompt (queued) over the burst's, or one of the
// burst's where it is not known (0 or NaN). Counted as one each, three 8K chat
// prompts queued beside a burst of two 64K documents made it a level of 5
// where the engine's count said 2.3, and the document's cost per prompt
// ahead came out a third of its prefill (report 000's simulator under six
// users, TestFirstHalfHour).
func BurstLevel(n int, waiting, prefilled, prompt, queued float64) float64 {
	level := float64(n)
	if !math.IsNaN(waiting) {
		share := 1.0
		if queued > 0 && !math.IsInf(queued, 0) {
			share = queued / prompt
		}
		level += waiting * share
	}
	if l := prefilled / prompt; l > level { // false for NaN
		return l
	}
	return level
}

// prefillLog keeps the engine's prefilled-token counter as read while
// probes run.
type prefillLog struct {
	times  []time.Time
	tokens []float64
}

func (p *prefillLog) add(at time.Time, tokens float64) {
	if !math.IsNaN(tokens) {
		p.times, p.tokens = append(p.times, at), append(p.tokens, tokens)
	}
}

// at is the counter at time t, interpolated between the readings around it;
// NaN past the last: the count at a burst's last first token is known only
// when a reading came after it.
func (p *prefillLog) at(t time.Time) float64 {
	for i := 1; i < len(p.times); i++ {
		a, b := p.times[i-1], p.times[i]
		if t.After(b) {
			continue
		}
		if !t.After(a) {
			return p.tokens[i-1]
		}
		f := t.Sub(a).Seconds() / b.Sub(a).Seconds()
		return p.tokens[i-1] + f*(p.tokens[i]-p.tokens[i-1])
	}
	return math.NaN()
}

// decodeInFlight sets each of a burst's samples' InFlight to the requests
// in flight while it decoded: production when the burst was sent, plus the
// burst's own probes, each counted for the share of this one's decode (first
// token to last) it was still running. The mean of the engine's readings
// around a probe undercounts a burst: the reading after it comes once the
// burst has drained, so a burst of 26 code-completion probes that decoded
// in a batch of 36 was keyed to 19, and the decode curve put 36 requests'
// slowness at 19.
func decodeInFlight(samples []Sample, production float64) {
	for i := range samples {
		a := samples[i].Result
		from, to := a.Start.Add(a.TTFT), a.Start.Add(a.E2E)
		if !to.After(from) {
			continue
		}
		var shared time.Duration
		for _, o := range samples {
			b := o.Result
			if lo, hi := later(from, b.Start), earlier(to, b.Start.Add(b.E2E)); hi.After(lo) {
				shared += hi.Sub(lo)
			}
		}
		samples[i].InFlight = production + shared.Seconds()/to.Sub(from).Seconds()
	}
}

// productionRise is how many more of production's requests were running
// as a burst ended than the production it was sent beside: the median,
// over its probes read right after they ended, of production's running
// requests then. A burst slows production's requests too, and requests
// that take longer are more of them at once (Little's law: in flight =
// arrivals x time in the server), so the batch a burst decodes in grows as
// it runs: a burst of 16 on a scripted server sent beside one production
// request decoded as if beside 21 others, not 16, and the laws read the
// extra production as the burst's own slope.
//
// Running, not in flight: production's prompts queued behind the burst's
// for prefill share no decode step. On a server that prefills one prompt
// at a time, a burst of 64 short prompts, each decoding nearly alone, was
// counted as decoding beside 8 (fcfs-prefill/2 under load). A reading
// gives production's requests in flight exactly (the engine's less the
// burst's others still in flight), not which of them run: of the engine's
// waiting prompts, as many as the burst's others still without a first
// token are taken for the burst's, the rest for production's. An engine
// that counts a prompt as running once its prefill begins (chunked
// prefill) may run some of the burst's; then the rest of its waiting are
// production's all the more.
func productionRise(samples []Sample, production float64) float64 {
	var at []float64
	for i, s := range samples {
		if math.IsNaN(s.Ended) || s.Lost {
			continue
		}
		end := s.Result.Start.Add(s.Result.E2E)
		inFlight, unstarted := 0.0, 0.0
		for j, o := range samples {
			// A lost probe ran until it was cut, after every other.
			if j == i || !o.Lost && !o.Result.Start.Add(o.Result.E2E).After(end) {
				continue
			}
			inFlight++
			if o.Result.TTFT <= 0 || o.Result.Start.Add(o.Result.TTFT).After(end) {
				unstarted++
			}
		}
		// Ended is NaN where the waiting count is unknown (in flight is
		// running plus waiting), so EndedWaiting is known here.
		waiting := math.Max(s.EndedWaiting-unstarted, 0)
		at = append(at, math.Max(s.Ended-inFlight-waiting, 0))
	}
	if len(at) == 0 {
		return 0
	}
	slices.Sort(at)
	return at[len(at)/2] - production
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
