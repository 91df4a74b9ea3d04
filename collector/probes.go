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

// Probes holds the per-probe metrics.
type Probes struct {
	ttft, itl, decode, e2e, prefill, queue, stall *prometheus.HistogramVec
	inputTokens, lastSuccess                      *prometheus.GaugeVec
	total, busy, bursts                           *prometheus.CounterVec
}

func newHistogram(name, help string, buckets []float64, nativeOnly bool) *prometheus.HistogramVec {
	if nativeOnly {
		buckets = nil // with a native bucket factor, nil means no classic buckets
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
	p := &Probes{
		ttft:    histogram("headroom_probe_ttft_seconds", "Time from request sent to first content token.", LatencyBuckets),
		itl:     histogram("headroom_probe_itl_seconds", "Mean inter-token latency of one probe: decode time / (output tokens - 1).", ITLBuckets),
		decode:  histogram("headroom_probe_decode_tokens_per_second", "Per-user decode speed of one probe, from the server's token count.", SpeedBuckets),
		e2e:     histogram("headroom_probe_e2e_seconds", "Time from request sent to last token.", LatencyBuckets),
		prefill: histogram("headroom_probe_prefill_tokens_per_second", "Prompt tokens / TTFT.", append(SpeedBuckets, 20000, 50000, 100000)),
		queue:   histogram("headroom_probe_queue_wait_seconds", "Server-side queue time during the probe, from the engine's metrics.", LatencyBuckets),
		stall:   histogram("headroom_probe_stall_seconds", "Longest gap between two chunks of one probe.", StallBuckets),
		inputTokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "headroom_probe_input_tokens", Help: "Prompt tokens of the last probe, as the server counted them.",
		}, []string{"target", "scenario"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "headroom_probe_last_success_timestamp_seconds", Help: "Unix time of the last successful probe.",
		}, []string{"target", "scenario"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "headroom_probes_total", Help: "Probes by result.",
		}, []string{"target", "scenario", "result"}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "headroom_probe_busy_seconds_total", Help: "Time with a probe in flight: what probing costs the target.",
		}, []string{"target"}),
		bursts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "headroom_calibration_bursts_total", Help: "Calibration bursts sent: probes sent together to measure the burst curve.",
		}, []string{"target", "scenario"}),
	}
	reg.MustRegister(p.ttft, p.itl, p.decode, p.e2e, p.prefill, p.queue, p.stall, p.inputTokens, p.lastSuccess, p.total, p.busy, p.bursts)
	return p
}

// Init creates the series of a target and scenario at zero, so rates and
// absent() work before the first probe.
func (p *Probes) Init(target, scenario string) {
	for _, o := range probe.Outcomes {
		p.total.WithLabelValues(target, scenario, string(o))
	}
	p.busy.WithLabelValues(target)
	p.bursts.WithLabelValues(target, scenario)
}

// Observe records one probe. Only a successful probe yields latency samples;
// queueWait < 0 means the engine's metrics could not attribute one.
func (p *Probes) Observe(target, scenario string, r probe.Result, queueWait time.Duration, now time.Time) {
	if r.Outcome == probe.Canceled {
		return
	}
	p.total.WithLabelValues(target, scenario, string(r.Outcome)).Inc()
	if r.PromptTokens > 0 {
		p.inputTokens.WithLabelValues(target, scenario).Set(float64(r.PromptTokens))
	}
	if r.Outcome != probe.Success {
		return
	}
	p.ttft.WithLabelValues(target, scenario).Observe(r.TTFT.Seconds())
	p.e2e.WithLabelValues(target, scenario).Observe(r.E2E.Seconds())
	p.stall.WithLabelValues(target, scenario).Observe(r.MaxGap.Seconds())
	if r.CompletionTokens >= 2 {
		p.itl.WithLabelValues(target, scenario).Observe(r.ITL().Seconds())
		p.decode.WithLabelValues(target, scenario).Observe(r.DecodeTPS())
	}
	if r.PromptTokens > 0 {
		p.prefill.WithLabelValues(target, scenario).Observe(r.PrefillTPS())
	}
	if queueWait >= 0 {
		p.queue.WithLabelValues(target, scenario).Observe(queueWait.Seconds())
	}
	p.lastSuccess.WithLabelValues(target, scenario).Set(float64(now.UnixNano()) / 1e9)
}

// AddBurst counts a calibration burst of a target's scenario.
func (p *Probes) AddBurst(target, scenario string) {
	p.bursts.WithLabelValues(target, scenario).Inc()
}

// AddBusy adds probe occupancy time to a target.
func (p *Probes) AddBusy(target string, d time.Duration) {
	p.busy.WithLabelValues(target).Add(d.Seconds())
}

// Forget drops every series of a target that left the configuration.
func (p *Probes) Forget(target string) {
	l := prometheus.Labels{"target": target}
	for _, v := range []*prometheus.HistogramVec{p.ttft, p.itl, p.decode, p.e2e, p.prefill, p.queue, p.stall} {
		v.DeletePartialMatch(l)
	}
	p.inputTokens.DeletePartialMatch(l)
	p.lastSuccess.DeletePartialMatch(l)
	p.total.DeletePartialMatch(l)
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
