package monitor

import (
	"context"
	"fmt"
	"time"

	"github.com/headroom-dev/headroom/internal/secret"
	"github.com/headroom-dev/headroom/probe"
)

// run is the target's one loop: it reads the engine (engineReads) and
// probes as its schedule says. A probe runs in a goroutine of its own while
// the loop goes on reading the engine, for the readings during a probe are
// its load (probeOnce) and the status page's. Idle, a target holds this one
// goroutine, where a loop each for the probes and the engine reads held two.
func (t *target) run(ctx context.Context) {
	names := make([]string, len(t.scenarios))
	intervals := make([]time.Duration, len(t.scenarios))
	for i, s := range t.scenarios {
		names[i], intervals[i] = s.Name, s.Interval
	}
	start := time.Now()
	t.m.readyMu.Lock()
	if r := t.m.ready[t.cfg.Name]; r.After(start) {
		start = r
	}
	t.m.readyMu.Unlock()
	sched := NewSchedule(names, intervals, t.budget, start, uint64(time.Now().UnixNano()))
	defer func() {
		t.m.readyMu.Lock()
		t.m.ready[t.cfg.Name] = sched.Ready()
		t.m.readyMu.Unlock()
	}()
	// The schedule starts before the first engine read, which may take
	// up to the scrape timeout: as it did with a loop of its own.
	reads := t.startReads(ctx)
	defer reads.stop()
	// A burst follows a burst only when it is another scenario's first
	// estimate: otherwise the schedule's own probes keep their turn. Five
	// scenarios queueing for their first estimate behind one another's
	// lone probes took most of an hour at the default budget.
	last := ""
	// Nor before every scenario has had its turn: a lone probe at an idle
	// moment gives a use case a bound (capacity.Evaluate, one level) and
	// the base its first burst needs, and a 96K scenario's first probe
	// waited 40 minutes behind the cheaper scenarios' bursts.
	tried := map[string]bool{}
	summarized, bursts, spent := time.Now(), 0, time.Duration(0)
	for {
		t.publish(sched, names)
		name, at := sched.Next()
		if due := summarized.Add(SummaryEvery); due.Before(at) {
			if !t.sleep(ctx, reads, due) {
				return
			}
			t.summarize(summarized, bursts, spent)
			summarized, bursts, spent = time.Now(), 0, 0
			continue
		}
		if !t.sleep(ctx, reads, at) {
			return
		}
		n, output := 1, 0
		if len(tried) < len(names) {
			tried[name] = true
		} else if b := t.wantBurst(); b.N > 1 && (last == "" || b.First && b.Scenario != last) {
			name, n, output = b.Scenario, b.N, b.Output
		}
		burst := n > 1
		last = ""
		if burst {
			last = name
		}
		sc, _ := scenario(t.scenarios, name)
		if output > 0 {
			sc = sc.WithOutput(output)
		}
		start := time.Now()
		var busy time.Duration
		var answered, ok bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			busy, answered, ok = t.probeN(ctx, sc, n)
		}()
		if !await(ctx, t, reads, done) {
			<-done // cut short: no measurement, but the probe's goroutine ends before the target does
			return
		}
		if !ok {
			return // shutdown or reload: a cut-short probe is no measurement
		}
		spent += busy
		switch {
		case burst:
			bursts++
			t.m.probes.AddBurst(t.cfg.Name, name)
			t.m.logger.Info("calibration burst", "target", t.cfg.Name, "scenario", name, "probes", n, "output_tokens", sc.OutputTokens, "busy", busy)
			sched.Charge(start, busy)
		case answered:
			sched.Done(name, start, start.Add(busy))
		default:
			sched.Failed(name, start, time.Now())
		}
		t.m.probes.AddBusy(t.cfg.Name, busy)
	}
}

// probeFailed keeps a scenario's failure for the status page.
func (t *target) probeFailed(scenario string, res probe.Result) {
	msg := string(res.Outcome)
	if res.Err != nil {
		msg += ": " + secret.Error(res.Err, t.secrets...).Error()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.probeErrs == nil {
		t.probeErrs = map[string]string{}
	}
	t.probeErrs[scenario] = msg
}

// summarize logs what the target's probes did since the last summary.
func (t *target) summarize(since time.Time, bursts int, busy time.Duration) {
	args := []any{"target", t.cfg.Name, "probes", t.ok.Swap(0), "failed", t.failed.Swap(0), "bursts", bursts,
		"busy_ratio", fmt.Sprintf("%.4f", busy.Seconds()/time.Since(since).Seconds())}
	if t.m.rec != nil {
		known, total := t.m.rec.Known(t.cfg.Name)
		args = append(args, "capacities_known", fmt.Sprintf("%d/%d", known, total))
	}
	t.m.logger.Info("target summary", args...)
}

// publish records each scenario's next probe time, for /api/v1/status.
func (t *target) publish(sched *Schedule, names []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next = make(map[string]time.Time, len(names))
	for _, n := range names {
		t.next[n] = sched.Due(n)
	}
}

// calibrated says whether the target may send calibration bursts: a
// calibrator, calibration on, and an engine whose load it can read.
func (t *target) calibrated() bool {
	return t.m.cal != nil && t.calib.Enabled && t.cfg.Engine != "none"
}

// wantBurst asks the calibrator, when there is one and calibration is on.
func (t *target) wantBurst() Burst {
	if !t.calibrated() {
		return Burst{}
	}
	t.mu.Lock()
	load, up := t.load, t.up
	t.mu.Unlock()
	if !up {
		return Burst{}
	}
	return t.m.cal.Burst(t.cfg.Name, load, t.calib.MaxBurst)
}
