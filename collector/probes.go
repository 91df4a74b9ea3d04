// Package collector exports headroom's measurements as Prometheus metrics. The
// names are the contract (internal/contract) that dashboards and alerts build on.
package collector

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/headroom-dev/headroom/probe"
)

// Classic buckets. Latency buckets include the reference use cases' thresholds
// (2, 8, 10, 12 s; 10, 15, 20 tok/s) so SLO ratios can be read off exactly.
var (
	LatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, .75, 1, 1.5, 2, 3, 5, 8, 10, 12, 15, 20, 30, 45, 60, 90, 120, 180, 300}
	ITLBuckets     = []float64{.001, .002, .005, .0075, .01, .015, .02, .03, .05, .07, .1, .15, .2, .5, 1, 2}
	SpeedBuckets   = []float64{1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000, 10000}
	StallBuckets   = []float64{.005, .01, .02, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300}
)

// The histograms of a target and scenario, by their index in pair.hists.
const (
	ttft = iota // lone probes': what the SLO panels and rules read
	itl
	decode
	e2e
	prefill
	queue
	stall
	calibTTFT // calibration bursts' probes': native buckets only
	calibITL
	calibDecode
	calibE2E
	nHists
)

// family is one histogram family: its description and classic bounds (a
// private copy: the exported lists above can be changed, and written
// histograms point into it).
type family struct {
	desc       *prometheus.Desc
	name, help string // for WriteText
	bounds     []float64
}

// Probes holds the per-probe metrics. The headroom_probe_* histograms and
// headroom_probes_total count lone probes only: what a request arriving
// among production meets, which the SLO panels and burn-rate rules read. A
// calibration burst's probes queue behind one another on purpose, so
// theirs go to headroom_calibration_*, never to the SLO series.
//
// It is one custom collector. Each target and scenario is a struct of
// plain numbers (pair), written out at each scrape with label pairs made
// once: as client_golang's HistogramVec children, its eleven histograms
// with native buckets held about 3 KB each, some 170 MB at 1,000 targets
// and the five default scenarios (docs/operations.md).
type Probes struct {
	hists                           [nHists]family
	total, calibTotal, bursts, busy *prometheus.Desc
	inputTokens, lastSuccess        *prometheus.Desc
	mu                              sync.Mutex
	pairs                           map[[2]string]*pair
	targets                         map[string]*targetSeries
	// outcomes are the result label's pairs, one per result for every
	// counter of it: a result counter's labels are this and its target and
	// scenario's own pairs, where three pairs of its own each were 2.9 MB at
	// 1,000 targets x 5 scenarios (BenchmarkProbesPage's fleet). The
	// registry only reads them.
	outcomes map[probe.Outcome]*dto.LabelPair
}

// pair is a target and scenario's series, each nil until it has a value.
type pair struct {
	labels      []*dto.LabelPair // scenario, target: sorted by name, as the registry wants
	hists       [nHists]*histSeries
	results     [2]results // lone probes', calibration's
	bursts      *value
	inputTokens *value
	lastSuccess *value
}

// results are the result counters of a pair's probes of one kind, by
// outcome, in the order they first happened: one or two in the common
// case, of the nine outcomes at most, where a Go map each (two a pair)
// held its header and a group of eight slots from its first entry.
type results []outcomeCount

type outcomeCount struct {
	o probe.Outcome
	c *value
}

// of is the counter of outcome o; nil where there is none.
func (rs results) of(o probe.Outcome) *value {
	for _, r := range rs {
		if r.o == o {
			return r.c
		}
	}
	return nil
}

// targetSeries is a target's own series.
type targetSeries struct {
	busy *value
}

// NewProbes creates the probe metrics and registers them with reg (nil:
// the caller does). nativeOnly leaves the histograms' classic buckets out:
// the text exposition then carries their sums and counts only, and
// Prometheus reads the buckets as native histograms.
func NewProbes(reg prometheus.Registerer, nativeOnly bool) *Probes {
	ts := []string{"target", "scenario"}
	tsr := []string{"target", "scenario", "result"}
	p := &Probes{pairs: map[[2]string]*pair{}, targets: map[string]*targetSeries{}, outcomes: map[probe.Outcome]*dto.LabelPair{},
		total:       valueFamilies[0].desc(tsr),
		calibTotal:  valueFamilies[1].desc(tsr),
		bursts:      valueFamilies[2].desc(ts),
		busy:        prometheus.NewDesc(busyName, busyHelp, []string{"target"}, nil),
		inputTokens: valueFamilies[3].desc(ts),
		lastSuccess: valueFamilies[4].desc(ts),
	}
	hist := func(i int, name, help string, bounds []float64) {
		if nativeOnly {
			bounds = nil
		}
		p.hists[i] = family{desc: prometheus.NewDesc(name, help, ts, nil), name: name, help: help, bounds: slices.Clone(bounds)}
	}
	hist(ttft, "headroom_probe_ttft_seconds", "Time from request sent to first content token, of lone probes.", LatencyBuckets)
	hist(itl, "headroom_probe_itl_seconds", "Mean inter-token latency of one lone probe: decode time / (output tokens - 1).", ITLBuckets)
	hist(decode, "headroom_probe_decode_tokens_per_second", "Per-user decode speed of one lone probe, from the server's token count.", SpeedBuckets)
	hist(e2e, "headroom_probe_e2e_seconds", "Time from request sent to last token, of lone probes.", LatencyBuckets)
	hist(prefill, "headroom_probe_prefill_tokens_per_second", "Prompt tokens / TTFT.", append(slices.Clone(SpeedBuckets), 20000, 50000, 100000))
	hist(queue, "headroom_probe_queue_wait_seconds", "Server-side queue time during the probe, from the engine's metrics.", LatencyBuckets)
	hist(stall, "headroom_probe_stall_seconds", "Longest gap between two chunks of one probe.", StallBuckets)
	// Only what the thresholds are set on, and native buckets only: a
	// burst is a few probes at one moment, read as its mean (the classic
	// _sum and _count), so a target and scenario cost 4 x 3 classic series
	// more, not the lone probes' 7 x 17-28.
	hist(calibTTFT, "headroom_calibration_ttft_seconds", "Time from request sent to first content token, of calibration bursts' probes.", nil)
	hist(calibITL, "headroom_calibration_itl_seconds", "Mean inter-token latency of one calibration burst's probe.", nil)
	hist(calibDecode, "headroom_calibration_decode_tokens_per_second", "Per-user decode speed of one calibration burst's probe.", nil)
	hist(calibE2E, "headroom_calibration_e2e_seconds", "Time from request sent to last token, of calibration bursts' probes.", nil)
	if reg != nil {
		reg.MustRegister(p)
	}
	return p
}

// labelPairs makes label pairs of name, value arguments, sorted by name
// as the registry wants them: made once a series, as client_golang does.
func labelPairs(nameValues ...string) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(nameValues)/2)
	for i := 0; i < len(nameValues); i += 2 {
		out = append(out, &dto.LabelPair{Name: &nameValues[i], Value: &nameValues[i+1]})
	}
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// newValue makes a counter or gauge series. p.mu is held.
func (p *Probes) newValue(desc *prometheus.Desc, typ dto.MetricType, labels []*dto.LabelPair) *value {
	return &value{p: p, desc: desc, typ: typ, labels: labels, created: time.Now()}
}

// pairOf returns the series of a target and scenario, made if new. p.mu is held.
func (p *Probes) pairOf(target, scenario string) *pair {
	k := [2]string{target, scenario}
	s, ok := p.pairs[k]
	if !ok {
		s = &pair{labels: labelPairs("target", target, "scenario", scenario)}
		p.pairs[k] = s
	}
	return s
}

// targetOf returns a target's own series, made if new. p.mu is held.
func (p *Probes) targetOf(target string) *targetSeries {
	t, ok := p.targets[target]
	if !ok {
		t = &targetSeries{busy: p.newValue(p.busy, dto.MetricType_COUNTER, labelPairs("target", target))}
		p.targets[target] = t
	}
	return t
}

// result returns the counter of a result of kind (0: lone, 1: calibration).
// p.mu is held.
func (p *Probes) result(s *pair, kind int, o probe.Outcome) *value {
	c := s.results[kind].of(o)
	if c == nil {
		res, ok := p.outcomes[o]
		if !ok {
			res = labelPairs("result", string(o))[0]
			p.outcomes[o] = res
		}
		// Sorted by name: result, scenario, target.
		c = p.newValue([]*prometheus.Desc{p.total, p.calibTotal}[kind], dto.MetricType_COUNTER,
			[]*dto.LabelPair{res, s.labels[0], s.labels[1]})
		s.results[kind] = append(s.results[kind], outcomeCount{o, c})
	}
	return c
}

// gauge sets a gauge of the pair, made if new. p.mu is held.
func (p *Probes) gauge(g **value, desc *prometheus.Desc, labels []*dto.LabelPair, v float64) {
	if *g == nil {
		*g = p.newValue(desc, dto.MetricType_GAUGE, labels)
	}
	(*g).v = v
}

func (p *Probes) observe(s *pair, i int, v float64, now time.Time) {
	if s.hists[i] == nil {
		s.hists[i] = &histSeries{p: p, i: i, h: newHist(p.hists[i].bounds, now), labels: s.labels}
	}
	s.hists[i].h.observe(v, p.hists[i].bounds)
}

// latencies counts a probe's result of kind and, when it succeeded,
// records its latencies in the kind's four histograms from first.
func (p *Probes) latencies(s *pair, kind, first int, r probe.Result, now time.Time) {
	p.result(s, kind, r.Outcome).v++
	if r.Outcome != probe.Success {
		return
	}
	p.observe(s, first+ttft, r.TTFT.Seconds(), now)
	p.observe(s, first+e2e, r.E2E.Seconds(), now)
	if r.CompletionTokens >= 2 {
		p.observe(s, first+itl, r.ITL().Seconds(), now)
		p.observe(s, first+decode, r.DecodeTPS(), now)
	}
}

// Init creates, at zero, the series of a target and scenario that are read
// before the first probe: headroom_probes_total{result="success"} (the
// rules' ProbesStale counts a scenario probed for hours without one
// success, and the failure ratio divides by its rate), the busy time, and
// where the target may burst (calibrated) its bursts counter. Another
// result appears with its first probe: each target and scenario had 15
// more series of zeros (7 failure results, and 8 of calibration's), 75,000
// at 1,000 targets and the default scenarios, which no rule reads before
// they count something.
func (p *Probes) Init(target, scenario string, calibrated bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.pairOf(target, scenario)
	p.result(s, 0, probe.Success)
	p.targetOf(target)
	if calibrated && s.bursts == nil {
		s.bursts = p.newValue(p.bursts, dto.MetricType_COUNTER, s.labels)
	}
}

// Observe records one lone probe. Only a successful probe yields latency
// samples; queueWait < 0 means the engine's metrics could not attribute one.
func (p *Probes) Observe(target, scenario string, r probe.Result, queueWait time.Duration, now time.Time) {
	if r.Outcome == probe.Canceled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.pairOf(target, scenario)
	p.latencies(s, 0, ttft, r, now)
	if r.PromptTokens > 0 {
		p.gauge(&s.inputTokens, p.inputTokens, s.labels, float64(r.PromptTokens))
	}
	if r.Outcome != probe.Success {
		return
	}
	p.observe(s, stall, r.MaxGap.Seconds(), now)
	if r.PromptTokens > 0 {
		p.observe(s, prefill, r.PrefillTPS(), now)
	}
	if queueWait >= 0 {
		p.observe(s, queue, queueWait.Seconds(), now)
	}
	p.gauge(&s.lastSuccess, p.lastSuccess, s.labels, float64(now.UnixNano())/1e9)
}

// ObserveCalibration records one probe of a calibration burst, apart from
// the lone probes' series.
func (p *Probes) ObserveCalibration(target, scenario string, r probe.Result) {
	if r.Outcome == probe.Canceled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latencies(p.pairOf(target, scenario), 1, calibTTFT, r, time.Now())
}

// AddBurst counts a calibration burst of a target's scenario.
func (p *Probes) AddBurst(target, scenario string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.pairOf(target, scenario)
	if s.bursts == nil {
		s.bursts = p.newValue(p.bursts, dto.MetricType_COUNTER, s.labels)
	}
	s.bursts.v++
}

// AddBusy adds probe occupancy time to a target.
func (p *Probes) AddBusy(target string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targetOf(target).busy.v += d.Seconds()
}

// Forget drops every series of a target that left the configuration, or
// with scenarios, only those of the scenarios it is no longer probed with.
func (p *Probes) Forget(target string, scenarios ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range scenarios {
		delete(p.pairs, [2]string{target, s})
	}
	if len(scenarios) > 0 {
		return
	}
	for k := range p.pairs {
		if k[0] == target {
			delete(p.pairs, k)
		}
	}
	delete(p.targets, target)
}

// Busy is a target's probe busy time so far, as
// headroom_probe_busy_seconds_total counts it.
func (p *Probes) Busy(target string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.targets[target]
	if !ok {
		return 0
	}
	return time.Duration(t.busy.v * float64(time.Second))
}

// Describe implements prometheus.Collector.
func (p *Probes) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range p.hists {
		ch <- f.desc
	}
	for _, d := range []*prometheus.Desc{p.total, p.calibTotal, p.bursts, p.busy, p.inputTokens, p.lastSuccess} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the series as they are now
// (each reads its numbers as the registry writes it).
func (p *Probes) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	ms := make([]prometheus.Metric, 0, 20*len(p.pairs)+len(p.targets))
	for _, s := range p.pairs {
		for _, h := range s.hists {
			if h != nil {
				ms = append(ms, h)
			}
		}
		for _, rs := range s.results {
			for _, r := range rs {
				ms = append(ms, r.c)
			}
		}
		for _, v := range []*value{s.bursts, s.inputTokens, s.lastSuccess} {
			if v != nil {
				ms = append(ms, v)
			}
		}
	}
	for _, t := range p.targets {
		ms = append(ms, t.busy)
	}
	// Sent once unlocked: the registry writes each as it receives it.
	p.mu.Unlock()
	for _, m := range ms {
		ch <- m
	}
}

// histSeries is one histogram series.
type histSeries struct {
	p      *Probes
	i      int // its family
	labels []*dto.LabelPair
	h      hist
}

func (m *histSeries) Desc() *prometheus.Desc { return m.p.hists[m.i].desc }

func (m *histSeries) Write(out *dto.Metric) error {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	out.Label = m.labels
	m.h.write(out, m.p.hists[m.i].bounds)
	return nil
}

// value is a counter or gauge series.
type value struct {
	p       *Probes
	desc    *prometheus.Desc
	typ     dto.MetricType
	labels  []*dto.LabelPair
	created time.Time // a counter's, as client_golang's
	v       float64
}

func (m *value) Desc() *prometheus.Desc { return m.desc }

// valueOut is what Write allocates for a counter or gauge, in one piece.
type valueOut struct {
	counter dto.Counter
	gauge   dto.Gauge
	created timestamppb.Timestamp
	v       float64
}

func (m *value) Write(out *dto.Metric) error {
	m.p.mu.Lock()
	o := &valueOut{v: m.v}
	m.p.mu.Unlock()
	out.Label = m.labels
	if m.typ == dto.MetricType_GAUGE {
		o.gauge.Value = &o.v
		out.Gauge = &o.gauge
		return nil
	}
	o.created.Seconds, o.created.Nanos = m.created.Unix(), int32(m.created.Nanosecond())
	o.counter.Value, o.counter.CreatedTimestamp = &o.v, &o.created
	out.Counter = &o.counter
	return nil
}
