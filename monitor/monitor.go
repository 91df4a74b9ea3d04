package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	promconfig "github.com/prometheus/common/config"
	"golang.org/x/sync/semaphore"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/secret"
	"github.com/headroom-dev/headroom/probe"
)

// Sample is one successful probe tagged with the load it met, for the capacity model.
type Sample struct {
	Target, Scenario string
	Time             time.Time // when it ended; a burst's probes: when the burst was sent
	// InFlight: the requests in flight while it ran, itself included. Load:
	// what its TTFT answers to, InFlight for a lone probe, and for a burst's
	// probes the requests they competed with for prefill (BurstLevel). NaN
	// if unknown.
	Load, InFlight float64
	// Sent: the requests in flight when it was sent, itself and its burst
	// included; NaN if unknown.
	Sent float64
	// KV is the KV-cache tokens production's Held running requests held
	// when it was sent (the engine's usage times its size); NaN where the
	// engine says neither. What a decode step reads grows with the tokens
	// its batch holds, not only with how many requests it holds: production
	// of long contexts slows a short probe more than as many short ones.
	KV, Held float64
	Burst    int // probes sent together, itself included; 0 for a lone probe
	// Level is, for a lone probe, what Load is for a burst's (BurstLevel);
	// 0 where the engine does not count the prompt tokens it prefills.
	Level float64
	// Queued is production's mean prompt tokens, by which the level (a
	// burst's: Load) counted production's prompts ahead as their tokens'
	// share of the probe's prompt; 0 where not known.
	Queued float64
	// Aftermath: a lone probe that was the first request the engine took
	// after a burst (probeN), which can pay for the burst.
	Aftermath bool
	// Lost: a burst's probe its deadline or the straggler cut ended. It
	// stood in the burst's prefill queue all the same, and its Result's
	// TTFT and E2E say how far its stream came (zero: no first token).
	Lost bool
	// Ended and EndedWaiting are the engine's requests in flight and
	// waiting in the reading taken right after it ended, NaN if none;
	// Rise, for a burst's probes, how many more of production's requests
	// were running as the burst ended than when it was sent
	// (productionRise), 0 where not known.
	Ended, EndedWaiting, Rise float64
	Result                    probe.Result
}

// Recorder receives probe samples (the capacity model), and hears when a
// target's server restarted or changed: its samples then describe a server
// that is gone.
type Recorder interface {
	Record(Sample)
	Decoded(target string, d Decode)
	Reset(target string)
	// Known says how many of the target's use cases have a capacity, of
	// how many, for the summary line.
	Known(target string) (known, total int)
}

// SummaryEvery is how often, at most, a target's probe loop logs its
// summary line: probes, failures, bursts, the budget spent and the
// capacities known since the last.
const SummaryEvery = 10 * time.Minute

// Decode is what the engine's own inter-token-latency histogram said of a
// span of time in which only production ran (decodeSpan): the mean time
// between tokens over every request it served, at the batch it ran then.
type Decode struct {
	Time time.Time // when the span began
	// Running is the batch the span's tokens were decoded in: its readings
	// of requests running, each weighted by itself (a step of b sequences
	// yields b tokens, so the histogram's mean weighs it b times), Σb²/Σb.
	Running float64
	ITL     float64 // seconds
	// Waiting is the share of those tokens decoded while prompts waited
	// for their prefill (readings with any waiting, weighted as Running):
	// an engine that prefills in the steps that decode lengthens them.
	Waiting float64
	// KV is the KV-cache tokens the batch held (the engine's usage times
	// its size, weighted as Running); NaN where the engine says neither.
	KV float64
	// Prompts is the prompt tokens the engine took in per second over the
	// span (its prompt-token counter); NaN where it has none. The waiting
	// gauge does not count a prompt the engine is prefilling (vLLM and
	// SGLang hold it among the running), so on an engine that prefills in
	// the steps that decode, Waiting misses most of the steps that did:
	// the prompts' work says how many there were.
	Prompts float64
	// Requests is the requests the engine took from its queue per second
	// over the span (its queue-time histogram's count); NaN where it has
	// none. Prompts over Requests is production's mean prompt.
	Requests float64
}

// Calibrator chooses calibration bursts (config calibration:) for a target
// now, given its load. It is asked before each probe while calibration is
// enabled.
type Calibrator interface {
	Burst(target string, load engine.Load, maxBurst int) Burst
}

// A Burst is a calibration burst: N concurrent probes of Scenario (N < 2:
// none), each generating Output tokens (0: the scenario's own). First says
// it is for a use case with no capacity yet.
type Burst struct {
	Scenario  string
	N, Output int
	First     bool
}

// Monitor owns the per-target loops. Apply swaps configurations safely.
type Monitor struct {
	logger *slog.Logger
	probes *collector.Probes
	rec    Recorder
	cal    Calibrator // nil: no calibration bursts
	dial   DialFunc   // nil: the network's
	// clients and prompts are shared by the targets: one transport per
	// http_client_config, one body and one sizing fit per prompt shape.
	clients *clients
	prompts *probe.Shared
	// pages bounds the engine metrics pages all targets read at once
	// (pagesAtOnce); it outlives reloads, as the targets' loops come and go.
	pages *engine.Pages

	mu      sync.Mutex
	cfg     *config.Config
	sem     *semaphore.Weighted
	slots   int // the semaphore's size
	targets map[string]*target
	// servers serialises probes of targets that share a server (one engine
	// metrics URL): chat and completions on one llama.cpp each added their
	// prefill to the other's TTFT.
	servers map[string]*semaphore.Weighted
	// ready is, per target, when its probe budget next allows a probe: a
	// loop restarted by a reload starts from its predecessor's debt, not
	// with an immediate probe of every scenario. Its own lock: a loop saves
	// it as it stops, while Apply holds mu and waits for it.
	readyMu sync.Mutex
	ready   map[string]time.Time
}

// DialFunc opens every connection to targets and their engines, as
// net.Dialer.DialContext does.
type DialFunc = promconfig.DialContextFunc

// Option changes how a Monitor reaches its targets.
type Option func(*Monitor)

// WithDial replaces the network: the virtual-time tests reach a simulator
// in memory through it, over the shipped HTTP clients.
func WithDial(dial DialFunc) Option { return func(m *Monitor) { m.dial = dial } }

// New returns a monitor that records into rec and asks cal (nil for none)
// for calibration bursts; call Apply to start probing.
func New(logger *slog.Logger, probes *collector.Probes, rec Recorder, cal Calibrator, opts ...Option) *Monitor {
	m := &Monitor{logger: logger, probes: probes, rec: rec, cal: cal, targets: map[string]*target{},
		servers: map[string]*semaphore.Weighted{}, ready: map[string]time.Time{}, prompts: probe.NewShared(),
		pages: engine.NewPages(pagesAtOnce())}
	for _, o := range opts {
		o(m)
	}
	m.clients = &clients{dial: m.dial}
	return m
}

// pagesAtOnce is how many engine metrics pages the monitor reads and parses
// at once, across all its targets. Parsing a page is CPU work, so more pages
// in flight than cores only hold their buffers (a 64 KiB line reader each,
// and the lines kept) while they wait for one: twice GOMAXPROCS keeps every
// core busy. The floor of 16 is for engines that send a page slowly: a read
// holds its slot until its page has arrived (never past its
// engine_scrape_timeout), and a few slow engines must not stall the other
// targets' reads. 16 pages are about 2 MB at the most; a 1,000-target
// replica had held 12.6 MB of pages at once.
func pagesAtOnce() int { return max(16, 2*runtime.GOMAXPROCS(0)) }

// Apply starts, restarts and stops target loops so that they match cfg. Loops of
// unchanged targets keep running, and with them their prompt calibration.
func (m *Monitor) Apply(ctx context.Context, cfg *config.Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sameScenarios := m.cfg != nil && reflect.DeepEqual(m.cfg.Scenarios, cfg.Scenarios) &&
		m.cfg.ProbeBudget == cfg.ProbeBudget && m.cfg.EngineScrapeInterval == cfg.EngineScrapeInterval && m.cfg.EngineScrapeTimeout == cfg.EngineScrapeTimeout && m.cfg.Calibration == cfg.Calibration
	if m.sem == nil || m.slots != cfg.MaxInFlight {
		m.sem, m.slots = semaphore.NewWeighted(int64(cfg.MaxInFlight)), cfg.MaxInFlight
		sameScenarios = false
	}
	want := map[string]config.Target{}
	for _, t := range cfg.Targets {
		want[t.Name] = t
	}
	for name, t := range m.targets {
		if w, ok := want[name]; ok && sameScenarios && reflect.DeepEqual(w, t.cfg) && !t.keyChanged() {
			continue
		}
		t.stop()
		delete(m.targets, name)
		w, ok := want[name]
		if !ok {
			m.probes.Forget(name)
			m.readyMu.Lock()
			delete(m.ready, name)
			m.readyMu.Unlock()
			continue
		}
		// Restarted: the series of scenarios it is no longer probed with go.
		var gone []string
		for _, s := range t.scenarios {
			if !slices.ContainsFunc(cfg.ScenariosOf(w), func(n config.Scenario) bool { return n.Name == s.Name }) {
				gone = append(gone, s.Name)
			}
		}
		if len(gone) > 0 {
			m.probes.Forget(name, gone...)
		}
	}
	for _, tc := range cfg.Targets {
		if _, ok := m.targets[tc.Name]; ok {
			continue
		}
		if m.servers[tc.MetricsURL] == nil {
			m.servers[tc.MetricsURL] = semaphore.NewWeighted(1)
		}
		t := newTarget(m, tc, cfg)
		m.targets[tc.Name] = t
		t.start(ctx)
	}
	// Every loop of a server that left has stopped: forget its lock.
	serving := map[string]bool{}
	for _, t := range cfg.Targets {
		serving[t.MetricsURL] = true
	}
	for u := range m.servers {
		if !serving[u] {
			delete(m.servers, u)
		}
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
	scrapeTO  time.Duration
	calib     config.Calibration
	apiKey    string
	secrets   []string // every credential it sends, for redaction
	// localMetrics: the engine's metrics page is on the target's own
	// scheme and host, and may have its key.
	localMetrics bool
	// setupErr: the key or the HTTP client could not be set up; the target
	// is disabled, loudly, until a reload fixes it.
	setupErr error
	// client reaches the target's API, metrics its engine metrics page:
	// the same client on the same host, one without credentials elsewhere.
	client, metrics *http.Client
	prober          *probe.Prober
	// sem is the global in-flight cap this loop was started under: a reload
	// that replaces the monitor's releases nothing into the wrong channel.
	sem *semaphore.Weighted
	// server is held while this target probes: one target of a server at a time.
	server *semaphore.Weighted
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// scrapeMu orders the target's engine scrapes.
	scrapeMu sync.Mutex
	// afterBurst marks the last burst until the next probe: the probe loop's
	// own, read and written by it alone.
	afterBurst burstMark
	// ok and failed count probes since the last summary; a burst's
	// probes add to them at once.
	ok, failed atomic.Int64

	mu     sync.Mutex
	load   engine.Load
	seen   engine.Load // the last reading, kept while the metrics are down
	decode decodeSpan
	queue  queueMean
	// prompt is production's mean prompt, in tokens, over the last span
	// that says it (Decode.Prompts over Decode.Requests, less ours); 0
	// where none has: what one of its queued requests weighs beside a
	// burst's (BurstLevel).
	prompt  float64
	up      bool
	lastErr string
	// probeErrs is each scenario's last probe failure until one succeeds.
	probeErrs map[string]string
	next      map[string]time.Time // scenario -> its next probe, at the earliest
	inFlight  map[*loadAcc]bool    // the probes running now
	own       ownProbes            // a decode span with one of ours is not production's alone
	prefills  map[*prefillLog]bool // the prefill counter as read while they run
}

// burstMark is a burst whose aftermath no probe has met yet, and the
// engine's prompt counter as it ended.
type burstMark struct {
	pending bool
	prompt  float64
}

// loadAcc averages the load readings taken while a probe is in flight.
type loadAcc struct{ sum, n float64 }

func (a *loadAcc) add(v float64) {
	if !math.IsNaN(v) {
		a.sum += v
		a.n++
	}
}

// mean is NaN with no reading.
func (a *loadAcc) mean() float64 {
	if a.n == 0 {
		return math.NaN()
	}
	return a.sum / a.n
}

// Clients builds a target's HTTP clients as the daemon does, for a check
// that tries it once (check-config --probe): one for its API, one for its
// metrics page, which gets the API key (metricsKey) only on the API's own
// scheme and host.
func Clients(tc config.Target) (api, metrics *http.Client, metricsKey bool, err error) {
	local := sameHost(tc.URL, tc.MetricsURL)
	api, metrics, err = (&clients{}).forTarget(tc, local)
	return api, metrics, local, err
}

func sameHost(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA == nil && errB == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

func newTarget(m *Monitor, tc config.Target, cfg *config.Config) *target {
	key, err := tc.APIKey()
	local := sameHost(tc.URL, tc.MetricsURL)
	client, metrics, cerr := m.clients.forTarget(tc, local)
	if err == nil {
		err = cerr
	}
	t := &target{m: m, cfg: tc, scenarios: cfg.ScenariosOf(tc), budget: cfg.ProbeBudget, scrapeInt: cfg.EngineScrapeInterval,
		scrapeTO: cfg.EngineScrapeTimeout, sem: m.sem, server: m.servers[tc.MetricsURL],
		calib: cfg.Calibration, apiKey: key, localMetrics: local, setupErr: err, client: client, metrics: metrics, inFlight: map[*loadAcc]bool{}, prefills: map[*prefillLog]bool{},
		load: engine.Load{Running: math.NaN(), Waiting: math.NaN(), KVUsage: math.NaN()}}
	engineName := tc.Engine
	if engineName == "none" {
		engineName = "auto"
	}
	if client == nil {
		client = http.DefaultClient // never used: a target with a setupErr does not start
	}
	t.secrets = tc.Secrets()
	t.prober = probe.NewProber(probe.Endpoint{BaseURL: tc.URL, APIKey: key, Secrets: t.secrets, Client: client}, tc.API, tc.Model, engineName, probe.WithShared(m.prompts))
	for _, s := range t.scenarios {
		m.probes.Init(tc.Name, s.Name, t.calibrated())
	}
	return t
}

// keyChanged reports whether the key the target was started with is no
// longer what its file or variable holds: a reload then restarts the target
// with the rotated key.
func (t *target) keyChanged() bool {
	key, err := t.cfg.APIKey()
	return err != nil || key != t.apiKey
}

// metricsKey is the API key for the engine's metrics page: sent only where
// that page is on the target's own host, never to another.
func (t *target) metricsKey() string {
	if !t.localMetrics {
		return ""
	}
	return t.apiKey
}

func (t *target) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	t.cancel = cancel
	if t.setupErr != nil {
		t.m.logger.Error("target disabled", "target", t.cfg.Name, "err", t.setupErr)
		return
	}
	t.wg.Go(func() { t.run(ctx) })
}

func (t *target) stop() {
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
	if t.client != nil { // its loops are done: the clients go back once
		t.m.clients.put(t.client)
		if t.metrics != t.client {
			t.m.clients.put(t.metrics)
		}
		t.client, t.metrics = nil, nil
	}
}

func (t *target) status() collector.TargetStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := make(map[string]time.Time, len(t.next))
	for k, v := range t.next {
		next[k] = v
	}
	errs := make(map[string]string, len(t.probeErrs))
	for k, v := range t.probeErrs {
		errs[k] = v
	}
	return collector.TargetStatus{Name: t.cfg.Name, Pool: t.cfg.Pool, Model: t.prober.Model(), Engine: t.load.Engine, URL: t.cfg.URL, Up: t.up, Load: t.load, Next: next,
		MetricsErr: t.lastErr, ProbeErrs: errs, Known: t.up || t.lastErr != "" || t.setupErr != nil || t.cfg.Engine == "none"}
}

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
