package collector

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/capacity"
)

// Capacity exports SLO thresholds, margins and capacity headroom. It evaluates
// on every scrape, so what Prometheus sees is never older than its scrape.
type Capacity struct {
	useCases                                          func() []capacity.UseCase
	estimates                                         func() []capacity.Estimate
	threshold, margin, capacity, free, ratio, samples *prometheus.Desc
	lower, upper, info, sloLower                      *prometheus.Desc
}

// NewCapacity returns a collector over the given sources.
func NewCapacity(useCases func() []capacity.UseCase, estimates func() []capacity.Estimate) *Capacity {
	tu := []string{"target", "use_case"}
	return &Capacity{useCases: useCases, estimates: estimates,
		threshold: prometheus.NewDesc("headroom_slo_threshold", "A use case's threshold; slo: ttft_seconds, e2e_seconds, itl_seconds (maxima), decode_tokens_per_second (minimum).", []string{"use_case", "slo"}, nil),
		margin:    prometheus.NewDesc("headroom_slo_margin_ratio", "Smallest relative margin to a threshold over the use case's window; < 0 means breached.", tu, nil),
		capacity:  prometheus.NewDesc("headroom_capacity_requests", "Estimated number of concurrent requests of the use case's shape at which it meets every threshold, from the fitted engine model; NaN when the data cannot place it (then only headroom_capacity_lower_requests is known).", tu, nil),
		lower:     prometheus.NewDesc("headroom_capacity_lower_requests", "Lower bound of the capacity (the fit's 95% band); for a capacity the data cannot place, the bound they support.", tu, nil),
		upper:     prometheus.NewDesc("headroom_capacity_upper_requests", "Upper bound of the capacity (the fit's 95% band); +Inf where nothing bounds it from above.", tu, nil),
		free:      prometheus.NewDesc("headroom_free_requests", "How many more requests of the use case's shape fit on top of the load now; absent while the capacity is only a bound.", tu, nil),
		ratio:     prometheus.NewDesc("headroom_ratio", "Headroom: free requests over the capacity, 0 to 1; absent while the capacity is only a bound.", tu, nil),
		samples:   prometheus.NewDesc("headroom_capacity_samples", "Observations the use case's model rests on: lone probes, bursts and bench cells in its curve window.", tu, nil),
		// Per threshold: the one whose bound is least sets the capacity's,
		// and the pools' replica rules name it as their reason.
		sloLower: prometheus.NewDesc("headroom_slo_capacity_lower_requests", "Lower bound of the requests of the use case's shape sent together at which one threshold's law reaches it (the fit's 95% band); the least is headroom_capacity_lower_requests while the laws have slopes.", []string{"target", "use_case", "slo"}, nil),
		info:     prometheus.NewDesc("headroom_use_case_info", "A use case and the scenario its probes run, always 1: joins thresholds to their scenario.", []string{"use_case", "scenario"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Capacity) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.threshold, c.margin, c.capacity, c.free, c.ratio, c.samples, c.lower, c.upper, c.info, c.sloLower} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Capacity) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.useCases() {
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, u.Name, u.Scenario)
		for _, s := range u.SLOs() {
			ch <- prometheus.MustNewConstMetric(c.threshold, prometheus.GaugeValue, s.Threshold, u.Name, s.Name)
		}
	}
	for _, e := range c.estimates() {
		l := []string{e.Target, e.UseCase}
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, e.Capacity, l...)
		ch <- prometheus.MustNewConstMetric(c.samples, prometheus.GaugeValue, float64(e.Samples), l...)
		if !math.IsNaN(e.Lower) {
			ch <- prometheus.MustNewConstMetric(c.lower, prometheus.GaugeValue, e.Lower, l...)
			ch <- prometheus.MustNewConstMetric(c.upper, prometheus.GaugeValue, e.Upper, l...)
		}
		for _, s := range e.SLOs {
			if !math.IsNaN(s.Lower) {
				ch <- prometheus.MustNewConstMetric(c.sloLower, prometheus.GaugeValue, s.Lower, e.Target, e.UseCase, s.Name)
			}
		}
		if !math.IsNaN(e.Margin) {
			ch <- prometheus.MustNewConstMetric(c.margin, prometheus.GaugeValue, e.Margin, l...)
		}
		// Free requests and headroom exist only where capacity and load do:
		// an absent series, not a NaN, keeps alert expressions simple.
		if !math.IsNaN(e.Free) {
			ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, e.Free, l...)
		}
		if !math.IsNaN(e.Ratio) && !math.IsInf(e.Ratio, 0) {
			ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, e.Ratio, l...)
		}
	}
}
