package monitor

import (
	"math"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/probe"
)

// DecodeSpan is how much time one Decode covers: long enough that its
// tokens are many and the readings it averages the batch over are several
// (the scrape interval is 5 s by default), short enough that production's
// load holds roughly still. A point per scrape would also be a point per
// probe's own reading, hundreds an hour for the capacity model to fit.
const DecodeSpan = 30 * time.Second

// ownProbes counts a target's probes as the engine's counters see them, so
// that a span's prompts and requests can be read less ours.
type ownProbes struct {
	sent int64 // probes sent so far
	// Of those that ended, the ones that came back: their prompt tokens
	// (the server's count, or the scenario's) and how many. The engine
	// counted each one's prompt between its sending and its end.
	prompts, requests float64
	// unknown ended where the engine's count of its prompt is not known:
	// it did not come back (counted or not), or its prefix was warm (an
	// engine may count only the part it did not hold, as llama.cpp does).
	unknown int64
}

// ended counts a probe of a scenario that ended with res.
func (o *ownProbes) ended(res probe.Result, sc config.Scenario) {
	if res.Outcome != probe.Success || sc.Cache != "cold" {
		o.unknown++
		return
	}
	o.requests++
	if res.PromptTokens > 0 {
		o.prompts += float64(res.PromptTokens)
	} else {
		o.prompts += float64(sc.InputTokens)
	}
}

// decodeSpan follows one server's inter-token-latency histogram across
// readings and yields a Decode once a span is complete, where production
// ran alone. A span in which a probe of ours ran is dropped: a burst's
// decode lasts seconds, readings 5 s apart catch it once or not at all,
// and its tokens would be read at a batch it never decoded in.
//
// Production's prompts and requests are read less ours over any span with
// none of ours in flight at its first and last readings: each of ours in
// it was then sent and ended between the two, so the engine's counters
// hold all of its prompt or none. The decode cannot be read so (its
// tokens' batch is not production's), but a server probed every few
// seconds, as the demo's, has no span without a probe.
type decodeSpan struct {
	from  engine.Load // the reading the span began with; zero: none yet
	since time.Time
	own   ownProbes // ours when it began
	edge  bool      // a probe of ours was in flight at its first reading
	ours  bool      // a probe of ours was in flight at one of its readings
	// Over its readings, each weighted by its running requests: their
	// sum, and the running, the waiting share and the KV tokens they
	// weigh.
	weight, batch, waiting, kv float64
	kvKnown                    bool
}

// add takes a reading (after changed found the server the same), our
// probes so far and whether one is in flight. When the reading completes a
// span it says the span's decode, and whether that holds tokens served
// with nothing of ours in it; its Prompts and Requests are production's
// wherever they can be read less ours (NaN where not).
func (s *decodeSpan) add(l engine.Load, now time.Time, own ownProbes, inFlight bool) (Decode, bool) {
	if s.from.Engine == "" || now.Sub(s.since) >= DecodeSpan {
		d, ok := s.end(l, now, own, inFlight)
		*s = decodeSpan{from: l, since: now, own: own, edge: inFlight, kvKnown: true}
		s.read(l, inFlight)
		return d, ok
	}
	s.read(l, inFlight)
	return Decode{Prompts: math.NaN(), Requests: math.NaN()}, false
}

// read adds a reading's running requests, waiting prompts and KV tokens.
func (s *decodeSpan) read(l engine.Load, inFlight bool) {
	s.ours = s.ours || inFlight
	b := l.Running
	if !(b > 0) {
		return
	}
	s.weight += b
	s.batch += b * b
	if l.Waiting > 0 {
		s.waiting += b
	}
	if kv := l.KVUsage * l.KVTokens; kv >= 0 {
		s.kv += b * kv
	} else {
		s.kvKnown = false
	}
}

// end is the decode of the span that reading l, taken at now, completes.
func (s *decodeSpan) end(l engine.Load, now time.Time, own ownProbes, inFlight bool) (Decode, bool) {
	if s.from.Engine == "" {
		return Decode{Prompts: math.NaN(), Requests: math.NaN()}, false
	}
	s.read(l, inFlight)
	n, sum := l.ITLCount-s.from.ITLCount, l.ITLSum-s.from.ITLSum
	d := Decode{Time: s.since, Running: s.batch / s.weight, ITL: sum / n, Waiting: s.waiting / s.weight, KV: math.NaN(), Prompts: math.NaN(), Requests: math.NaN()}
	// Per second of the engine's time, as its histogram and the probes
	// (Result.Scaled) are: a time-scaled simulator's seconds.
	span := now.Sub(s.since).Seconds() * max(l.TimeScale, 1)
	if !s.edge && !inFlight && own.unknown == s.own.unknown {
		if p := l.PromptTokens - s.from.PromptTokens - (own.prompts - s.own.prompts); p >= 0 { // false for NaN
			d.Prompts = p / span
		}
		if r := l.QueueCount - s.from.QueueCount - (own.requests - s.own.requests); r >= 0 {
			d.Requests = r / span
		}
	}
	if s.kvKnown {
		d.KV = s.kv / s.weight
	}
	// false for NaN too: an engine without the histogram, or a span in
	// which nothing was decoded or the readings said nothing of the batch.
	return d, !s.ours && own.sent == s.own.sent && n > 0 && sum >= 0 && d.Running >= 1
}

// queueMean is production's waiting prompts averaged over time, each
// reading weighted by the time since the last with a memory of DecodeSpan
// (an exponential mean): a prompt the engine's gauge caught waiting at one
// reading is a queue for the share of the time it stands, which is what a
// request arriving at any moment meets, and what the capacity model charges
// a newcomer's prefill and decode with.
type queueMean struct {
	mean float64
	at   time.Time // of the last reading; zero: none yet
}

// add takes a reading of waiting prompts (NaN: unknown, which forgets the
// mean) and says the mean with it.
func (q *queueMean) add(waiting float64, now time.Time) float64 {
	switch {
	case math.IsNaN(waiting):
		*q = queueMean{}
		return waiting
	case q.at.IsZero():
		q.mean = waiting
	default:
		q.mean += (1 - math.Exp(-now.Sub(q.at).Seconds()/DecodeSpan.Seconds())) * (waiting - q.mean)
	}
	q.at = now
	return q.mean
}
