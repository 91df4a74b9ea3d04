package monitor

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/probe"
)

// Sample is one successful probe tagged with the load it met, for the capacity model.
type Sample struct {
	Target, Scenario string
	Time             time.Time
	Load             float64 // requests in flight during the probe, itself included; NaN if unknown
	Result           probe.Result
}

// Recorder receives probe samples (the capacity model).
type Recorder interface {
	Record(Sample)
}

// Monitor owns the per-target loops. Apply swaps configurations safely.
type Monitor struct {
	logger *slog.Logger
	probes *collector.Probes
	rec    Recorder
	client *http.Client

	mu      sync.Mutex
	cfg     *config.Config
	sem     chan struct{}
	targets map[string]*target
}

// New returns a monitor; call Apply to start probing.
func New(logger *slog.Logger, probes *collector.Probes, rec Recorder) *Monitor {
	return &Monitor{logger: logger, probes: probes, rec: rec, client: probe.NewClient(false), targets: map[string]*target{}}
}

// Apply starts, restarts and stops target loops so that they match cfg. Loops of
// unchanged targets keep running, and with them their prompt calibration.
func (m *Monitor) Apply(ctx context.Context, cfg *config.Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sameScenarios := m.cfg != nil && reflect.DeepEqual(m.cfg.Scenarios, cfg.Scenarios) &&
		m.cfg.ProbeBudget == cfg.ProbeBudget && m.cfg.EngineScrapeInterval == cfg.EngineScrapeInterval
	if m.sem == nil || cap(m.sem) != cfg.MaxInFlight {
		m.sem = make(chan struct{}, cfg.MaxInFlight)
		sameScenarios = false
	}
	want := map[string]config.Target{}
	for _, t := range cfg.Targets {
		want[t.Name] = t
	}
	for name, t := range m.targets {
		if w, ok := want[name]; ok && sameScenarios && reflect.DeepEqual(w, t.cfg) {
			continue
		}
		t.stop()
		delete(m.targets, name)
		if _, ok := want[name]; !ok {
			m.probes.Forget(name)
		}
	}
	for _, tc := range cfg.Targets {
		if _, ok := m.targets[tc.Name]; ok {
			continue
		}
		t := newTarget(m, tc, cfg)
		m.targets[tc.Name] = t
		t.start(ctx)
	}
	m.cfg = cfg
}

// Stop cancels every loop and waits for them; in-flight probes are dropped unrecorded.
func (m *Monitor) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, t := range m.targets {
		t.stop()
		delete(m.targets, name)
	}
}

// Status lists every target's last engine reading.
func (m *Monitor) Status() []collector.TargetStatus {
	m.mu.Lock()
	ts := make([]*target, 0, len(m.targets))
	for _, t := range m.targets {
		ts = append(ts, t)
	}
	m.mu.Unlock()
	out := make([]collector.TargetStatus, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.status())
	}
	return out
}

type target struct {
	m         *Monitor
	cfg       config.Target
	scenarios []config.Scenario
	budget    float64
	scrapeInt time.Duration
	apiKey    string
	keyErr    error
	prober    *probe.Prober
	// sem is the global in-flight cap this loop was started under: a reload
	// that replaces the monitor's releases nothing into the wrong channel.
	sem    chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	load     engine.Load
	up       bool
	lastErr  string
	inFlight *loadAcc // non-nil while a probe runs
}

// loadAcc averages the load readings taken while a probe is in flight.
type loadAcc struct{ sum, n float64 }

func (a *loadAcc) add(v float64) {
	if !math.IsNaN(v) {
		a.sum += v
		a.n++
	}
}

func newTarget(m *Monitor, tc config.Target, cfg *config.Config) *target {
	key, err := tc.APIKey()
	t := &target{m: m, cfg: tc, scenarios: cfg.Scenarios, budget: cfg.ProbeBudget, scrapeInt: cfg.EngineScrapeInterval, sem: m.sem,
		apiKey: key, keyErr: err,
		load: engine.Load{Running: math.NaN(), Waiting: math.NaN(), KVUsage: math.NaN()}}
	engineName := tc.Engine
	if engineName == "none" {
		engineName = "auto"
	}
	t.prober = probe.NewProber(probe.Endpoint{BaseURL: tc.URL, APIKey: key, Client: m.client}, tc.API, tc.Model, engineName)
	for _, s := range cfg.Scenarios {
		m.probes.Init(tc.Name, s.Name)
	}
	return t
}

func (t *target) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	t.cancel = cancel
	if t.keyErr != nil {
		t.m.logger.Error("target disabled", "target", t.cfg.Name, "err", t.keyErr)
		return
	}
	if t.cfg.Engine != "none" {
		t.wg.Go(func() { t.scrapeLoop(ctx) })
	}
	t.wg.Go(func() { t.probeLoop(ctx) })
}

func (t *target) stop() {
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
}

func (t *target) status() collector.TargetStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	return collector.TargetStatus{Name: t.cfg.Name, Model: t.prober.Model(), Engine: t.load.Engine, URL: t.cfg.URL, Up: t.up, Load: t.load}
}

// scrape reads the engine's metrics once, updates the target's state and logs
// only when the state changes, so a down endpoint does not flood the log.
func (t *target) scrape(ctx context.Context) (engine.Load, bool) {
	ctx, cancel := context.WithTimeout(ctx, max(2*time.Second, t.scrapeInt))
	defer cancel()
	l, err := engine.Scrape(ctx, t.m.client, t.cfg.MetricsURL, t.apiKey, t.cfg.Engine)
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
	t.up, t.lastErr, t.load = true, "", l
	if t.inFlight != nil {
		t.inFlight.add(l.InFlight())
	}
	return l, true
}

func (t *target) scrapeLoop(ctx context.Context) {
	tick := time.NewTicker(t.scrapeInt)
	defer tick.Stop()
	for {
		t.scrape(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (t *target) probeLoop(ctx context.Context) {
	names := make([]string, len(t.scenarios))
	intervals := make([]time.Duration, len(t.scenarios))
	for i, s := range t.scenarios {
		names[i], intervals[i] = s.Name, s.Interval
	}
	sched := NewSchedule(names, intervals, t.budget, time.Now(), uint64(time.Now().UnixNano()))
	for {
		name, at := sched.Next()
		if !sleepUntil(ctx, at) {
			return
		}
		sc, _ := scenario(t.scenarios, name)
		select {
		case t.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		start := time.Now()
		s, ok := t.probeOnce(ctx, sc)
		end := time.Now()
		<-t.sem
		if ctx.Err() != nil {
			return // shutdown or reload: a cut-short probe is no measurement
		}
		sched.Done(name, start, end)
		t.m.probes.AddBusy(t.cfg.Name, end.Sub(start))
		if ok && t.m.rec != nil {
			t.m.rec.Record(s)
		}
	}
}

func (t *target) probeOnce(ctx context.Context, sc config.Scenario) (Sample, bool) {
	acc := &loadAcc{}
	var before engine.Load
	var beforeOK bool
	if t.cfg.Engine != "none" {
		before, beforeOK = t.scrape(ctx)
		if beforeOK {
			acc.add(before.InFlight() + 1) // the probe is about to join
		}
		t.mu.Lock()
		t.inFlight = acc
		t.mu.Unlock()
	}
	res := t.prober.Probe(ctx, probe.Scenario{Name: sc.Name, InputTokens: sc.InputTokens, OutputTokens: sc.OutputTokens,
		Cold: sc.Cache == "cold", Timeout: sc.ProbeTimeout()})
	t.mu.Lock()
	t.inFlight = nil
	t.mu.Unlock()
	queueWait := time.Duration(-1)
	if t.cfg.Engine != "none" && ctx.Err() == nil {
		after, afterOK := t.scrape(ctx)
		if afterOK {
			acc.add(after.InFlight() + 1)
		}
		// The histogram's delta is this probe's queue time only when the probe
		// was the one request that left the queue in between.
		if beforeOK && afterOK && after.QueueCount-before.QueueCount == 1 {
			queueWait = time.Duration((after.QueueSum - before.QueueSum) * float64(time.Second))
		}
	}
	if res.Outcome == probe.Canceled || ctx.Err() != nil {
		return Sample{}, false
	}
	now := time.Now()
	t.m.probes.Observe(t.cfg.Name, sc.Name, res, queueWait, now)
	if res.Outcome != probe.Success {
		t.m.logger.Warn("probe failed", "target", t.cfg.Name, "scenario", sc.Name, "result", res.Outcome, "err", res.Err)
		return Sample{}, false
	}
	t.m.logger.Debug("probe", "target", t.cfg.Name, "scenario", sc.Name, "ttft", res.TTFT, "itl", res.ITL(),
		"decode_tps", res.DecodeTPS(), "prompt_tokens", res.PromptTokens, "output_tokens", res.CompletionTokens)
	load := math.NaN()
	if acc.n > 0 {
		load = acc.sum / acc.n
	}
	return Sample{Target: t.cfg.Name, Scenario: sc.Name, Time: now, Load: load, Result: res}, true
}

func scenario(ss []config.Scenario, name string) (config.Scenario, bool) {
	for _, s := range ss {
		if s.Name == name {
			return s, true
		}
	}
	return config.Scenario{}, false
}

func sleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
