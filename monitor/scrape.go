package monitor

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/secret"
)

// scrape reads the engine's metrics once, updates the target's state and logs
// only when the state changes, so a down endpoint does not flood the log.
func (t *target) scrape(ctx context.Context) (engine.Load, bool) {
	ctx, cancel := context.WithTimeout(ctx, t.scrapeTO)
	defer cancel()
	// One scrape at a time: a probe's and the loop's could otherwise be
	// read by the server in one order and answered in the other, and a
	// counter would seem to go back.
	t.scrapeMu.Lock()
	defer t.scrapeMu.Unlock()
	l, err := t.m.pages.Scrape(ctx, t.metrics, t.cfg.MetricsURL, t.metricsKey(), t.cfg.Engine)
	err = secret.Error(err, t.secrets...)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return engine.Load{}, false // cut short by shutdown or reload: no news about the target
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if t.up || t.lastErr == "" {
			t.m.logger.Warn("engine metrics down", "target", t.cfg.Name, "url", t.cfg.MetricsURL, "err", err)
		}
		t.up, t.lastErr = false, err.Error()
		return engine.Load{}, false
	}
	if !t.up {
		t.m.logger.Info("engine metrics up", "target", t.cfg.Name, "engine", l.Engine)
		if t.cfg.Engine == "auto" {
			t.prober.SetEngine(l.Engine)
		}
	}
	if why, another := changed(t.seen, l); another {
		t.m.logger.Info("server changed: forgetting its load-response curves", "target", t.cfg.Name, "why", why)
		if t.m.rec != nil {
			t.m.rec.Reset(t.cfg.Name)
		}
		t.decode, t.queue, t.prompt = decodeSpan{}, queueMean{}, 0
	} else if why != "" {
		t.m.logger.Info("server restarted: keeping its load-response curves (same engine, model and KV cache)", "target", t.cfg.Name, "why", why)
		t.decode, t.queue = decodeSpan{}, queueMean{}
	}
	d, ok := t.decode.add(l, time.Now(), t.own, len(t.inFlight) > 0)
	if p := d.Prompts / d.Requests; p > 0 && !math.IsInf(p, 0) { // false for NaN
		t.prompt = p
	}
	if ok {
		if t.m.rec != nil {
			t.m.rec.Decoded(t.cfg.Name, d)
		}
	}
	t.up, t.lastErr, t.load, t.seen = true, "", production(l, float64(len(t.inFlight))), l
	t.load.Queue = t.queue.add(t.load.Waiting, time.Now())
	for acc := range t.inFlight {
		acc.add(l.InFlight())
	}
	for p := range t.prefills {
		p.add(time.Now(), l.PrefilledTokens)
	}
	return l, true
}

// production is the engine's load less headroom's own probes in flight:
// the load that the status, the free requests and the pools' replica rules
// read is production's, so that a calibration burst of 19 does not read as
// 19 more users (nor page as a lack of headroom). The engine does not say
// which of its requests wait; a burst arrives after the requests already
// running and queues behind them first come first served, so the probes
// come off the waiting first. A probe not yet arrived at the server takes
// off one too many, never below zero.
func production(l engine.Load, own float64) engine.Load {
	off := math.Min(own, l.Waiting)
	l.Waiting -= off
	l.Running = math.Max(l.Running-(own-off), 0)
	return l
}

// engineReads times a target's engine reads in its loop (run): at once,
// then every interval at the target's own phase of it (from its name, as
// Prometheus offsets its scrapes): a thousand targets started together
// scraped at one instant, each interval, over a thousand connections at
// once.
type engineReads struct {
	every time.Duration
	phase *time.Timer
	tick  *time.Ticker
	c     <-chan time.Time // fires when a read is due; nil: no engine to read
}

func (t *target) startReads(ctx context.Context) *engineReads {
	r := &engineReads{every: t.scrapeInt}
	if t.cfg.Engine == "none" {
		return r
	}
	t.scrapeApart(ctx)
	r.phase = time.NewTimer(time.Duration(xxhash.Sum64String(t.cfg.Name) % uint64(t.scrapeInt)))
	r.c = r.phase.C
	return r
}

// read reads the engine once c has fired: from the phase on, c is an
// interval's ticker.
func (r *engineReads) read(ctx context.Context, t *target) {
	if r.tick == nil {
		r.tick = time.NewTicker(r.every)
		r.c = r.tick.C
	}
	t.scrapeApart(ctx)
}

// scrapeApart reads the engine in a goroutine of its own and waits for it,
// so that the read's deep stack (the HTTP client, the page's parser) is not
// the loop's. Go grows a goroutine's stack at once but shrinks it only at a
// collection, by half, and only while it uses less than a quarter: a
// thousand loops each reading every few seconds held 14 MB of stacks
// between reads, where the reads' own stacks go back to the runtime when
// they end, for the next read to reuse.
func (t *target) scrapeApart(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.scrape(ctx)
	}()
	<-done
}

func (r *engineReads) stop() {
	if r.phase != nil {
		r.phase.Stop()
	}
	if r.tick != nil {
		r.tick.Stop()
	}
}

// await waits for c, reading the engine whenever a read is due meanwhile;
// false when ctx ended first.
func await[T any](ctx context.Context, t *target, r *engineReads, c <-chan T) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-c:
			return true
		case <-r.c:
			r.read(ctx, t)
		}
	}
}

// sleep waits until at, reading the engine whenever a read is due
// meanwhile; false when ctx ended first.
func (t *target) sleep(ctx context.Context, r *engineReads, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	return await(ctx, t, r, tm.C)
}
