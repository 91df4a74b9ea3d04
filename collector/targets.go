package collector

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/engine"
)

// TargetStatus is what is known about a target's own metrics.
type TargetStatus struct {
	Name, Pool, Model, Engine, URL string
	Up                             bool
	Load                           engine.Load
	// Next is each scenario's next probe time, at the earliest.
	Next map[string]time.Time
	// MetricsErr is why the engine's metrics could not be read, "" while
	// they can; ProbeErrs each scenario's last probe failure, secrets
	// redacted, until a probe of it succeeds.
	MetricsErr string
	ProbeErrs  map[string]string
	// Known: the target's state has been read at least once (its metrics
	// page answered or failed, or it has none to read), so that /metrics
	// shows it as it is, not as not yet seen.
	Known bool
}

// Readiness is /-/ready's answer for the targets' states: ready once each
// target's state is known, whether up or down. A target that is down keeps
// the daemon ready: its metrics are what alerts on it read, and a replica
// taken out of a Service for it would not be scraped.
func Readiness(ts []TargetStatus) (ready bool, text string) {
	var unknown, down []string
	for _, t := range ts {
		switch {
		case !t.Known:
			unknown = append(unknown, t.Name)
		case !t.Up && t.MetricsErr != "":
			down = append(down, t.Name)
		}
	}
	if len(unknown) > 0 {
		return false, fmt.Sprintf("Not ready: %d of %d targets not read yet: %s", len(unknown), len(ts), list(unknown))
	}
	text = fmt.Sprintf("Ready: %d targets, %d of them up", len(ts), len(ts)-len(down))
	if len(down) > 0 {
		text += "; down: " + list(down)
	}
	return true, text
}

// list names at most ten targets: a fleet's answer stays short.
func list(names []string) string {
	sort.Strings(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// Targets exports what each target's engine says about itself. It is a custom
// Collector because its label set follows the configuration and the engines.
type Targets struct {
	status                       func() []TargetStatus
	info, up, requests, kv, load *prometheus.Desc
}

// NewTargets returns a collector reading status on every scrape.
func NewTargets(status func() []TargetStatus) *Targets {
	return &Targets{status: status,
		info:     prometheus.NewDesc("headroom_target_info", "Target metadata.", []string{"target", "pool", "model", "engine", "url"}, nil),
		up:       prometheus.NewDesc("headroom_target_up", "1 if the target's own /metrics could be read.", []string{"target"}, nil),
		requests: prometheus.NewDesc("headroom_target_requests", "Requests on the target by state, from its engine's metrics.", []string{"target", "state"}, nil),
		kv:       prometheus.NewDesc("headroom_target_kv_cache_usage_ratio", "KV-cache usage, 0..1.", []string{"target"}, nil),
		load:     prometheus.NewDesc("headroom_load_requests", "Concurrent requests now (running + waiting), headroom's own probes in flight excluded.", []string{"target"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Targets) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.up, c.requests, c.kv, c.load} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Targets) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.status() {
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, s.Name, s.Pool, s.Model, s.Engine, s.URL)
		up := 0.0
		if s.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, s.Name)
		if !s.Up {
			continue
		}
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			if !math.IsNaN(v) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
			}
		}
		gauge(c.requests, s.Load.Running, s.Name, "running")
		gauge(c.requests, s.Load.Waiting, s.Name, "waiting")
		gauge(c.kv, s.Load.KVUsage, s.Name)
		gauge(c.load, s.Load.InFlight(), s.Name)
	}
}
