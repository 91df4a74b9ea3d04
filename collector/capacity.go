package collector

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/capacity"
)

// Capacity exports SLO thresholds, margins and capacity headroom. It asks
// for the estimates at every scrape, so what Prometheus sees is never older
// than its scrape: the estimator answers from its cache what has not
// changed since (estimator/cache.go says when an estimate is recomputed).
type Capacity struct {
	useCases                                          func() []capacity.UseCase
	estimates                                         func() []capacity.Estimate
	threshold, margin, capacity, free, ratio, samples *prometheus.Desc
	lower, upper, info, sloLower                      *prometheus.Desc
}

// NewCapacity returns a collector over the given sources.
func NewCapacity(useCases func() []capacity.UseCase, estimates func() []capacity.Estimate) *Capacity {
	tu := []string{"target", "use_case"}
	d := func(i int) *prometheus.Desc {
		return prometheus.NewDesc(capacityFamilies[i].name, capacityFamilies[i].help, tu, nil)
	}
	return &Capacity{useCases: useCases, estimates: estimates,
		threshold: prometheus.NewDesc(thresholdName, thresholdHelp, []string{"use_case", "slo"}, nil),
		margin:    d(0), capacity: d(1), lower: d(2), upper: d(3), free: d(4), ratio: d(5), samples: d(6),
		// Per threshold: the one whose bound is least sets the capacity's,
		// and the pools' replica rules name it as their reason.
		sloLower: prometheus.NewDesc(sloLowerName, sloLowerHelp, []string{"target", "use_case", "slo"}, nil),
		info:     prometheus.NewDesc(infoName, infoHelp, []string{"use_case", "scenario"}, nil),
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
