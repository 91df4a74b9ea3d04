// Package collector exports headroom's measurements as Prometheus metrics. The
// names are the contract (internal/contract) that dashboards and alerts build on.
package collector

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

// Probes holds the per-probe metrics. The headroom_probe_* histograms and
// headroom_probes_total count lone probes only: what a request arriving
// among production meets, which the SLO panels and burn-rate rules read. A
// calibration burst's probes queue behind one another on purpose, so
// theirs go to headroom_calibration_* (calibration), never to the SLO
// series.
type Probes struct {
	lone                     latencies
	prefill, queue, stall    *prometheus.HistogramVec
	inputTokens, lastSuccess *prometheus.GaugeVec
	busy, bursts             *prometheus.CounterVec
	calibration              latencies
}

// latencies are the measurements that the use cases' thresholds are set on,
// and the results they came with, of one kind of probe.
type latencies struct {
	ttft, itl, decode, e2e *prometheus.HistogramVec
	total                  *prometheus.CounterVec
}

// observe counts r and, when it succeeded, records its latencies.
func (l latencies) observe(target, scenario string, r probe.Result) {
	l.total.WithLabelValues(target, scenario, string(r.Outcome)).Inc()
	if r.Outcome != probe.Success {
		return
	}
	l.ttft.WithLabelValues(target, scenario).Observe(r.TTFT.Seconds())
	l.e2e.WithLabelValues(target, scenario).Observe(r.E2E.Seconds())
	if r.CompletionTokens >= 2 {
		l.itl.WithLabelValues(target, scenario).Observe(r.ITL().Seconds())
		l.decode.WithLabelValues(target, scenario).Observe(r.DecodeTPS())
	}
}

func (l latencies) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.ttft, l.itl, l.decode, l.e2e, l.total}
}

func (l latencies) init(target, scenario string) {
	for _, o := range probe.Outcomes {
		l.total.WithLabelValues(target, scenario, string(o))
	}
}

func (l latencies) forget(target prometheus.Labels) {
	for _, c := range []interface{ DeletePartialMatch(prometheus.Labels) int }{l.ttft, l.itl, l.decode, l.e2e, l.total} {
		c.DeletePartialMatch(target)
	}
}

// newHistogram makes a histogram with native buckets, and classic ones
// unless nativeOnly or buckets is nil (with a native bucket factor, nil
// means none).
func newHistogram(name, help string, buckets []float64, nativeOnly bool) *prometheus.HistogramVec {
	if nativeOnly {
		buckets = nil
	}
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: name, Help: help, Buckets: buckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"target", "scenario"})
}

// NewProbes creates and registers the probe metrics. nativeOnly leaves
// the histograms' classic buckets out: the text exposition then carries their
// sums and counts only, and Prometheus reads the buckets as native histograms.
func NewProbes(reg prometheus.Registerer, nativeOnly bool) *Probes {
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return newHistogram(name, help, buckets, nativeOnly)
	}
	results := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"target", "scenario", "result"})
	}
	p := &Probes{
		lone: latencies{
			ttft:   histogram("headroom_probe_ttft_seconds", "Time from request sent to first content token, of lone probes.", LatencyBuckets),
			itl:    histogram("headroom_probe_itl_seconds", "Mean inter-token latency of one lone probe: decode time / (output tokens - 1).", ITLBuckets),
			decode: histogram("headroom_probe_decode_tokens_per_second", "Per-user decode speed of one lone probe, from the server's token count.", SpeedBuckets),
			e2e:    histogram("headroom_probe_e2e_seconds", "Time from request sent to last token, of lone probes.", LatencyBuckets),
			total:  results("headroom_probes_total", "Lone probes by result."),
		},
		prefill: histogram("headroom_probe_prefill_tokens_per_second", "Prompt tokens / TTFT.", append(SpeedBuckets, 20000, 50000, 100000)),
		queue:   histogram("headroom_probe_queue_wait_seconds", "Server-side queue time during the probe, from the engine's metrics.", LatencyBuckets),
		stall:   histogram("headroom_probe_stall_seconds", "Longest gap between two chunks of one probe.", StallBuckets),
		inputTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "headroom_probe_input_tokens", Help: "Prompt tokens of the last probe, as the server counted them.",
		}, []string{"target", "scenario"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "headroom_probe_last_success_timestamp_seconds", Help: "Unix time of the last successful probe.",
		}, []string{"target", "scenario"}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "headroom_probe_busy_seconds_total", Help: "Time with a probe in flight, calibration bursts included: what probing costs the target.",
		}, []string{"target"}),
		bursts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "headroom_calibration_bursts_total", Help: "Calibration bursts sent: probes sent together to measure the burst curve.",
		}, []string{"target", "scenario"}),
		// Only what the thresholds are set on, and native buckets only: a
		// burst is a few probes at one moment, read as its mean (the
		// classic _sum and _count), so a target and scenario cost 4 x 3
		// classic series more, not the lone probes' 7 x 17-28.
		calibration: latencies{
			ttft:   histogram("headroom_calibration_ttft_seconds", "Time from request sent to first content token, of calibration bursts' probes.", nil),
			itl:    histogram("headroom_calibration_itl_seconds", "Mean inter-token latency of one calibration burst's probe.", nil),
			decode: histogram("headroom_calibration_decode_tokens_per_second", "Per-user decode speed of one calibration burst's probe.", nil),
			e2e:    histogram("headroom_calibration_e2e_seconds", "Time from request sent to last token, of calibration bursts' probes.", nil),
			total:  results("headroom_calibration_probes_total", "Calibration bursts' probes by result."),
		},
	}
	reg.MustRegister(p.lone.collectors()...)
	reg.MustRegister(p.prefill, p.queue, p.stall, p.inputTokens, p.lastSuccess, p.busy, p.bursts)
	reg.MustRegister(p.calibration.collectors()...)
	return p
}

// Init creates the series of a target and scenario at zero, so rates and
// absent() work before the first probe; those of calibration bursts only
// where the target may send them (calibrated), so that a target that never
// bursts exports none.
func (p *Probes) Init(target, scenario string, calibrated bool) {
	p.lone.init(target, scenario)
	p.busy.WithLabelValues(target)
	if calibrated {
		p.bursts.WithLabelValues(target, scenario)
		p.calibration.init(target, scenario)
	}
}

// Observe records one lone probe. Only a successful probe yields latency
// samples; queueWait < 0 means the engine's metrics could not attribute one.
func (p *Probes) Observe(target, scenario string, r probe.Result, queueWait time.Duration, now time.Time) {
	if r.Outcome == probe.Canceled {
		return
	}
	p.lone.observe(target, scenario, r)
	if r.PromptTokens > 0 {
		p.inputTokens.WithLabelValues(target, scenario).Set(float64(r.PromptTokens))
	}
	if r.Outcome != probe.Success {
		return
	}
	p.stall.WithLabelValues(target, scenario).Observe(r.MaxGap.Seconds())
	if r.PromptTokens > 0 {
		p.prefill.WithLabelValues(target, scenario).Observe(r.PrefillTPS())
	}
	if queueWait >= 0 {
		p.queue.WithLabelValues(target, scenario).Observe(queueWait.Seconds())
	}
	p.lastSuccess.WithLabelValues(target, scenario).Set(float64(now.UnixNano()) / 1e9)
}

// ObserveCalibration records one probe of a calibration burst, apart from
// the lone probes' series.
func (p *Probes) ObserveCalibration(target, scenario string, r probe.Result) {
	if r.Outcome == probe.Canceled {
		return
	}
	p.calibration.observe(target, scenario, r)
}

// AddBurst counts a calibration burst of a target's scenario.
func (p *Probes) AddBurst(target, scenario string) {
	p.bursts.WithLabelValues(target, scenario).Inc()
}

// AddBusy adds probe occupancy time to a target.
func (p *Probes) AddBusy(target string, d time.Duration) {
	p.busy.WithLabelValues(target).Add(d.Seconds())
}

// Forget drops every series of a target that left the configuration, or
// with scenarios, only those of the scenarios it is no longer probed with.
func (p *Probes) Forget(target string, scenarios ...string) {
	for _, s := range scenarios {
		l := prometheus.Labels{"target": target, "scenario": s}
		p.lone.forget(l)
		p.calibration.forget(l)
		for _, v := range []*prometheus.HistogramVec{p.prefill, p.queue, p.stall} {
			v.DeletePartialMatch(l)
		}
		p.inputTokens.DeletePartialMatch(l)
		p.lastSuccess.DeletePartialMatch(l)
		p.bursts.DeletePartialMatch(l)
	}
	if len(scenarios) > 0 {
		return
	}
	l := prometheus.Labels{"target": target}
	p.lone.forget(l)
	p.calibration.forget(l)
	for _, v := range []*prometheus.HistogramVec{p.prefill, p.queue, p.stall} {
		v.DeletePartialMatch(l)
	}
	p.inputTokens.DeletePartialMatch(l)
	p.lastSuccess.DeletePartialMatch(l)
	p.busy.DeletePartialMatch(l)
	p.bursts.DeletePartialMatch(l)
}

// Busy is a target's probe busy time so far, as
// headroom_probe_busy_seconds_total counts it.
func (p *Probes) Busy(target string) time.Duration {
	var m dto.Metric
	if err := p.busy.WithLabelValues(target).Write(&m); err != nil {
		return 0
	}
	return time.Duration(m.GetCounter().GetValue() * float64(time.Second))
}
