package monitor

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/probe"
)

// probeN sends n probes of a scenario at once and records them. busy is the
// time the target had a probe in flight, from the first sent to the last
// done: a burst's probes queue behind one another's prefill, so the server
// works for them about that long, not for the sum of their waits. ok is
// false when ctx ended first; answered is false when no probe gave a
// sample (the server did not answer, or nothing measurable), which the
// schedule retries after a backoff (Schedule.Failed).
func (t *target) probeN(ctx context.Context, sc config.Scenario, n int) (busy time.Duration, answered, ok bool) {
	// One probe is prepared before the slots are taken, the one that talks
	// to the server (prepare); a burst's others only copy its sizing and
	// body, once the slots are taken: on a busy replica hundreds of
	// targets wait for the slots, and each held its whole burst prepared.
	preps, ok := t.prepare(ctx, sc, 1, n)
	if preps == nil {
		return 0, false, ok
	}
	// One target of a server at a time, then all n global slots at once:
	// bursts of two targets taking slots one by one could each hold part
	// and wait on the other forever. Always in this order.
	if err := t.server.Acquire(ctx, 1); err != nil {
		return 0, false, false
	}
	defer t.server.Release(1)
	if err := t.sem.Acquire(ctx, int64(n)); err != nil {
		return 0, false, false
	}
	if n > 1 {
		rest, ok := t.prepare(ctx, sc, n-1, n)
		if rest == nil {
			t.sem.Release(int64(n))
			return 0, false, ok
		}
		preps = append(preps, rest...)
	}
	return t.send(ctx, sc, preps)
}

// prepare prepares k probes of a scenario for a burst of n (1: a lone
// probe); nil when there are none to send: ok is false when ctx ended
// first, true when the preparation failed (recorded as the burst's). The
// first of a scenario talks to the server; the prober keeps what it
// learned (probe.Prober.Prepare), so that the next are made from memory.
func (t *target) prepare(ctx context.Context, sc config.Scenario, k, n int) (preps []*probe.Prepared, ok bool) {
	// Model lookup, tokenizer detection and prompt sizing talk to the
	// server too: under the scenario's deadline, and for the first probe
	// before any slot is taken, so a stalled server holds no slot another
	// target needs (the prober keeps the model and each scenario's
	// sizing: a burst's others are made from them).
	psc := probe.Scenario{Name: sc.Name, InputTokens: sc.InputTokens, OutputTokens: sc.OutputTokens,
		Cold: sc.Cache == "cold", Timeout: sc.ProbeTimeout()}
	pctx, cancel := context.WithTimeout(ctx, psc.Timeout)
	preps = make([]*probe.Prepared, k)
	for i := range preps {
		preps[i] = t.prober.Prepare(pctx, psc)
	}
	cancel()
	if ctx.Err() != nil {
		return nil, false
	}
	if res, failed := preps[0].Failed(); failed {
		t.observe(sc.Name, res, n, -1, time.Now())
		t.failed.Add(1)
		t.probeFailed(sc.Name, res)
		t.m.logger.Warn("probe failed", "target", t.cfg.Name, "scenario", sc.Name, "stage", "prepare", "result", res.Outcome, "err", res.Err)
		return nil, true
	}
	return preps, true
}

// send sends prepared probes at once, their global slots taken, and
// records them. prepare and send are functions of their own so that
// probeN waits for the slots in a small stack frame: on a busy replica
// most targets have a probe waiting, and one parked in a frame of 1.5 KB
// kept 8 KB of stack where it can shrink to 4 (Go halves a stack only
// while it uses less than a quarter of it).
func (t *target) send(ctx context.Context, sc config.Scenario, preps []*probe.Prepared) (busy time.Duration, answered, ok bool) {
	n := len(preps)
	var before engine.Load
	var beforeOK bool
	if t.cfg.Engine != "none" {
		before, beforeOK = t.scrape(ctx)
	}
	// The first request a server takes after a burst can pay for the burst:
	// llama.cpp saves the burst's slots to its prompt cache when the next
	// task takes a slot, and that request's first token came 2.6-4.0 s
	// late instead of 0.3 s on an H100. Waiting does not clear it; another
	// request does. So a lone probe is in the aftermath when the engine has
	// prefilled no prompt since the burst ended (or cannot say), and is
	// kept off the curves and margins (capacity.Point.Aftermath).
	aftermath := n == 1 && t.afterBurst.pending && !(before.PromptTokens > t.afterBurst.prompt)
	t.afterBurst.pending = false
	var prefill *prefillLog // read by every scrape until the probes are done
	if beforeOK && !math.IsNaN(before.PrefilledTokens) {
		prefill = &prefillLog{}
		prefill.add(time.Now(), before.PrefilledTokens)
		t.mu.Lock()
		t.prefills[prefill] = true
		t.mu.Unlock()
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var samples []Sample
	// A burst's last probe is cut when it has run twice as long as the
	// others took (straggler): bctx is what cuts it.
	bctx, cut := context.WithCancel(ctx)
	defer cut()
	var straggler *time.Timer
	finished := 0
	for _, pr := range preps {
		wg.Go(func() {
			s, ok := t.probeOnce(bctx, sc, pr, before, beforeOK, n)
			t.sem.Release(1)
			mu.Lock()
			defer mu.Unlock()
			// A burst's probe that stalled to its deadline or the cut
			// held its place in the queue: the others' order counts it.
			s.Lost = !ok && n > 1 && ctx.Err() == nil && (s.Result.Outcome == probe.Timeout || s.Result.Outcome == probe.Canceled)
			if ok || s.Lost {
				samples = append(samples, s)
			}
			if finished++; n > 1 && finished == n-1 {
				straggler = time.AfterFunc(time.Duration(stragglerSpan-1)*time.Since(start), cut)
			}
		})
	}
	wg.Wait()
	busy = time.Since(start)
	if straggler != nil && !straggler.Stop() && ctx.Err() == nil {
		t.m.logger.Info("calibration burst: cut its last probe, stalled past what the others took", "target", t.cfg.Name, "scenario", sc.Name,
			"probes", n, "after", busy)
	}
	if prefill != nil {
		// Each probe's own reading after it ended came after its first token.
		t.mu.Lock()
		delete(t.prefills, prefill)
		t.mu.Unlock()
	}
	t.mu.Lock()
	if n > 1 {
		t.afterBurst = burstMark{pending: true, prompt: t.seen.PromptTokens}
	}
	queued := t.prompt // 0: not known, which BurstLevel counts as one of the burst's
	t.mu.Unlock()
	switch {
	case n == 1 && len(samples) == 1:
		samples[0].Aftermath = aftermath
		// A lone probe's level says whether it met another prefill: one that
		// met none is a burst of one, whatever was decoding (capacity.split).
		if prefill != nil {
			samples[0].Level = burstLevel(samples, 1, before, beforeOK, prefill, start, sc.InputTokens, queued)
			samples[0].Queued = queued
		}
		t.record(samples[0])
	case len(samples) > 0:
		// Lost probes too, even where none came back: a burst of eight
		// beside llama.cpp's users all ran into their deadline, with
		// first tokens at their places in the queue.
		level := burstLevel(samples, n, before, beforeOK, prefill, start, sc.InputTokens, queued)
		if beforeOK && n > 1 {
			decodeInFlight(samples, before.InFlight())
			rise := productionRise(samples, before.Running)
			for i := range samples {
				samples[i].Rise = rise
			}
		}
		for _, s := range samples {
			s.Time, s.Load, s.Queued = start, level, queued
			t.record(s)
		}
	}
	return busy, cameBack(samples), ctx.Err() == nil
}

// cameBack says whether any of the probes came back.
func cameBack(samples []Sample) bool {
	return slices.ContainsFunc(samples, func(s Sample) bool { return !s.Lost })
}

// stragglerSpan is how many times the time its other probes took a burst's
// last probe may run before it is cut. At worst the last request waited
// for every other to finish (a KV cache or a prefill queue that admits them
// in turn) and then ran with fewer beside it, which takes no longer than
// they took: past twice that, something no law counts stalled it (a
// lognormal tail, a network stall), its measurement would be an outlier,
// and its time alone would bill the budget for up to a probe's deadline
// (a 31-probe burst's straggler at 41 s bills 34 minutes of quiet at the
// default 2%; in the noise family's run no probe came for the 29 minutes
// left of the hour).
const stragglerSpan = 2

// observe exports a probe's result: a lone probe's (n = 1) into the
// series the SLO panels and burn-rate rules read, a burst's apart, so that
// the load headroom adds on purpose never reads as what users meet. The
// capacity model gets both (record).
func (t *target) observe(scenario string, res probe.Result, n int, queueWait time.Duration, now time.Time) {
	if n > 1 {
		t.m.probes.ObserveCalibration(t.cfg.Name, scenario, res)
		return
	}
	t.m.probes.Observe(t.cfg.Name, scenario, res, queueWait, now)
}

func (t *target) record(s Sample) {
	if t.m.rec != nil {
		t.m.rec.Record(s)
	}
}

// probeOnce runs one probe that joins the target with n-1 others (a burst).
// Its requests in flight are the mean of the engine's readings while it ran:
// the one taken before plus the n sent, each scrape until it ends, the one
// after plus itself. That is a lone probe's load; a burst's is the burst's,
// tagged by probeN once all are done.
func (t *target) probeOnce(ctx context.Context, sc config.Scenario, pr *probe.Prepared, before engine.Load, beforeOK bool, n int) (Sample, bool) {
	acc := &loadAcc{}
	if beforeOK {
		acc.add(before.InFlight() + float64(n))
	}
	t.mu.Lock()
	t.inFlight[acc] = true
	t.own.sent++
	t.mu.Unlock()
	res := t.prober.Send(ctx, pr)
	t.mu.Lock()
	delete(t.inFlight, acc) // with its prompt counted, at once: a reading sees the one or the other
	t.own.ended(res, sc)
	t.mu.Unlock()
	if beforeOK && before.TimeScale > 1 {
		// A time-scaled `headroom sim` (the demo's): its thresholds, histograms
		// and curves are in simulated time, and so are the probes. The
		// budget stays in wall time: it is the server's.
		res = res.Scaled(before.TimeScale)
	}
	queueWait := time.Duration(-1)
	ended, endedWaiting := math.NaN(), math.NaN()
	if t.cfg.Engine != "none" && ctx.Err() == nil {
		after, afterOK := t.scrape(ctx)
		if afterOK {
			acc.add(after.InFlight() + 1)
			ended, endedWaiting = after.InFlight(), after.Waiting
		}
		// The histogram's delta is this probe's queue time only when the probe
		// was the one request that left the queue in between.
		if n == 1 && beforeOK && afterOK && after.QueueCount-before.QueueCount == 1 {
			queueWait = time.Duration((after.QueueSum - before.QueueSum) * float64(time.Second))
		}
	}
	now := time.Now()
	ok := false
	switch {
	case res.Outcome == probe.Canceled || ctx.Err() != nil:
	case res.Outcome != probe.Success:
		t.observe(sc.Name, res, n, queueWait, now)
		t.failed.Add(1)
		t.probeFailed(sc.Name, res)
		t.m.logger.Warn("probe failed", "target", t.cfg.Name, "scenario", sc.Name, "result", res.Outcome, "err", res.Err)
	default:
		ok = true
		t.observe(sc.Name, res, n, queueWait, now)
		t.ok.Add(1)
		t.mu.Lock()
		delete(t.probeErrs, sc.Name)
		t.mu.Unlock()
		t.m.logger.Debug("probe", "target", t.cfg.Name, "scenario", sc.Name, "ttft", res.TTFT, "itl", res.ITL(),
			"decode_tps", res.DecodeTPS(), "prompt_tokens", res.PromptTokens, "output_tokens", res.CompletionTokens)
	}
	inFlight := acc.mean()
	burst := 0
	if n > 1 {
		burst = n
	}
	sent, kv, held := math.NaN(), math.NaN(), math.NaN()
	if beforeOK {
		sent = before.InFlight() + float64(n)
		if h := before.KVUsage * before.KVTokens; h >= 0 && before.Running >= 0 {
			kv, held = h, before.Running
		}
	}
	return Sample{Target: t.cfg.Name, Scenario: sc.Name, Time: now, Load: inFlight, InFlight: inFlight, Sent: sent, KV: kv, Held: held, Burst: burst, Ended: ended, EndedWaiting: endedWaiting, Result: res}, ok
}

// changed says why the server behind two readings is not the one it was,
// "" when it is, and whether it is another server (another engine, model
// or KV cache size, whose laws are not the last one's) or the same one
// restarted (its counters went back). A first reading (no engine yet)
// changes nothing.
func changed(before, now engine.Load) (why string, another bool) {
	switch {
	case before.Engine == "":
		return "", false
	case now.Engine != before.Engine:
		return fmt.Sprintf("engine %s became %s", before.Engine, now.Engine), true
	case now.Model != before.Model:
		return fmt.Sprintf("model %q became %q", before.Model, now.Model), true
	case now.KVTokens != before.KVTokens && !math.IsNaN(now.KVTokens) && !math.IsNaN(before.KVTokens):
		return fmt.Sprintf("KV cache of %.0f tokens became %.0f", before.KVTokens, now.KVTokens), true
	case now.GenerationTokens < before.GenerationTokens:
		return fmt.Sprintf("generation tokens counter went back from %.0f to %.0f", before.GenerationTokens, now.GenerationTokens), false
	case now.PromptTokens < before.PromptTokens:
		return fmt.Sprintf("prompt tokens counter went back from %.0f to %.0f", before.PromptTokens, now.PromptTokens), false
	case now.QueueCount < before.QueueCount:
		return fmt.Sprintf("queue time count went back from %.0f to %.0f", before.QueueCount, now.QueueCount), false
	}
	return "", false
}

func scenario(ss []config.Scenario, name string) (config.Scenario, bool) {
	for _, s := range ss {
		if s.Name == name {
			return s, true
		}
	}
	return config.Scenario{}, false
}
