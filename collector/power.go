package collector

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/power"
)

// readTimeout bounds one read of the power source, inside a scrape.
const readTimeout = 3 * time.Second

// Power exports GPU power, energy and limits, and energy per generated token.
// It reads its source at scrape time, as node_exporter's collectors do.
type Power struct {
	logger *slog.Logger
	source func() power.Source
	gpuMap func() map[string]string // GPU index or UUID -> target
	tokens func() map[string]float64

	mu       sync.Mutex
	perToken *power.PerToken
	lastErr  string

	watts, joules, limit, jpt *prometheus.Desc
}

// NewPower returns a power collector. gpuMap maps GPU indexes and UUIDs to
// targets; tokens gives each target's cumulative generation tokens.
func NewPower(logger *slog.Logger, source func() power.Source, gpuMap func() map[string]string, tokens func() map[string]float64) *Power {
	l := []string{"gpu", "uuid", "target"}
	return &Power{logger: logger, source: source, gpuMap: gpuMap, tokens: tokens,
		perToken: power.NewPerToken(5 * time.Minute),
		watts:    prometheus.NewDesc("headroom_gpu_power_watts", "GPU power draw.", l, nil),
		joules:   prometheus.NewDesc("headroom_gpu_energy_joules_total", "GPU energy consumed since the driver loaded.", l, nil),
		limit:    prometheus.NewDesc("headroom_gpu_power_limit_watts", "Enforced GPU power limit.", l, nil),
		jpt:      prometheus.NewDesc("headroom_energy_joules_per_token", "Energy of a target's GPUs per generated token over the last 5 minutes.", []string{"target"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Power) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.watts, c.joules, c.limit, c.jpt} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Power) Collect(ch chan<- prometheus.Metric) {
	src := c.source()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	readings, err := src.Read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if err.Error() != c.lastErr {
			c.logger.Warn("read GPU power", "err", err)
			c.lastErr = err.Error()
		}
		return
	}
	c.lastErr = ""
	gpus := c.gpuMap()
	energy := map[string]float64{}
	for _, r := range readings {
		target, ok := gpus[r.UUID]
		if !ok {
			target, ok = gpus[r.Index]
		}
		if !ok {
			target = gpus[power.AllGPUs]
		}
		l := []string{r.Index, r.UUID, target}
		emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
			if !math.IsNaN(v) {
				ch <- prometheus.MustNewConstMetric(d, t, v, l...)
			}
		}
		emit(c.watts, prometheus.GaugeValue, r.Watts)
		emit(c.joules, prometheus.CounterValue, r.Joules)
		emit(c.limit, prometheus.GaugeValue, r.LimitW)
		if target != "" {
			energy[target] += r.Joules // NaN if any GPU of the target lacks it
		}
	}
	tokens := c.tokens()
	now := time.Now()
	for target, j := range energy {
		tok, ok := tokens[target]
		if !ok {
			tok = math.NaN()
		}
		if v := c.perToken.Observe(target, now, j, tok); !math.IsNaN(v) {
			ch <- prometheus.MustNewConstMetric(c.jpt, prometheus.GaugeValue, v, target)
		}
	}
}
