package monitor

import (
	"math"
	"time"

	"github.com/headroom-dev/headroom/engine"
)

// DecodeSpan is how much time one Decode covers: long enough that its
// tokens are many and the readings it averages the batch over are several
// (the scrape interval is 5 s by default), short enough that production's
// load holds roughly still. A point per scrape would also be a point per
// probe's own reading, hundreds an hour for the capacity model to fit.
const DecodeSpan = 30 * time.Second

// decodeSpan follows one server's inter-token-latency histogram across
// readings and yields a Decode once a span is complete.
type decodeSpan struct {
	from    engine.Load // the reading the span began with; zero: none yet
	since   time.Time
	running loadAcc // the span's readings of requests running
}

// add takes a reading (after changed found the server the same) and says
// the span's decode when the reading completes one with tokens served.
func (s *decodeSpan) add(l engine.Load, now time.Time) (Decode, bool) {
	if s.from.Engine == "" {
		*s = decodeSpan{from: l, since: now}
		s.running.add(l.Running)
		return Decode{}, false
	}
	s.running.add(l.Running)
	if now.Sub(s.since) < DecodeSpan {
		return Decode{}, false
	}
	n, sum := l.ITLCount-s.from.ITLCount, l.ITLSum-s.from.ITLSum
	d := Decode{Time: s.since, Running: s.running.mean(), ITL: sum / n}
	*s = decodeSpan{from: l, since: now}
	s.running.add(l.Running)
	// false for NaN too: an engine without the histogram, or a span in
	// which nothing was decoded or the readings said nothing of the batch.
	return d, n > 0 && sum >= 0 && d.Running >= 1
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
