package monitor

import (
	"context"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"time"

	promconfig "github.com/prometheus/common/config"
	"golang.org/x/sync/semaphore"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
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
