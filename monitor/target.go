package monitor

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/probe"
)

// target is one configured server: its clients, its engine readings and
// its probes' state. Its loop (run, loop.go) owns it; the fields under mu
// are also read by the status page and by the probes running beside the
// loop (probing.go), and the engine readings are scrape.go's.
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
