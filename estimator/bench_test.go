package estimator

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/probe"
)

// fleetEstimator is an estimator of n targets with the default scenarios
// and use cases, each scenario with an hour of lone probes, one a minute,
// and bursts of 2, 4 and 8. The points go straight to the store: Record
// would have each target refreshed in the background while the benchmark
// runs.
func fleetEstimator(b *testing.B, n int) (*Estimator, []collector.TargetStatus, time.Time) {
	var text strings.Builder
	text.WriteString("targets:\n")
	for i := range n {
		fmt.Fprintf(&text, "  - {name: t%04d, url: 'http://h%d'}\n", i, i)
	}
	cfg, err := config.Parse([]byte(text.String()))
	if err != nil {
		b.Fatal(err)
	}
	e := New(cfg, nil)
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(1e9, 0)
	status := make([]collector.TargetStatus, 0, n)
	for _, t := range cfg.Targets {
		status = append(status, collector.TargetStatus{Name: t.Name, Up: true, Load: engine.Load{Running: 1, KVTokens: 500000}})
		for _, s := range cfg.Scenarios {
			base := float64(s.InputTokens) / 20000
			rec := func(at time.Time, level float64, burst int) {
				ttft := base * level * (1 + 0.1*r.Float64())
				e.record(monitor.Sample{Target: t.Name, Scenario: s.Name, Time: at, Load: level, InFlight: level, Sent: level, Burst: burst,
					Result: probe.Result{Outcome: probe.Success, TTFT: time.Duration(ttft * float64(time.Second)), E2E: time.Duration((ttft + 2) * float64(time.Second)),
						CompletionTokens: s.OutputTokens, Decode: time.Duration((0.02 + 0.002*level) * float64(s.OutputTokens-1) * float64(time.Second))}})
			}
			for m := range 60 {
				at := t0.Add(time.Duration(m) * time.Minute)
				rec(at, 1, 0)
				if m%20 == 10 {
					k := 2 << (m / 20)
					for range k {
						rec(at, float64(k), k)
					}
				}
			}
		}
	}
	return e, status, t0.Add(time.Hour)
}

// BenchmarkEstimates is one /metrics scrape's estimates of 1,000 targets x
// the 5 default use cases: "cached", nothing changed since the last;
// "load", every target's load changed since (the engines are read every
// 5 s, a scrape comes every 15 s or more); "probed", a probe recorded on
// every target since
// (go test ./estimator -run '^$' -bench Estimates -benchmem).
func BenchmarkEstimates(b *testing.B) {
	e, status, now := fleetEstimator(b, 1000)
	b.Run("cached", func(b *testing.B) {
		e.Estimates(status, now)
		for b.Loop() {
			e.Estimates(status, now)
		}
	})
	b.Run("load", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			for j := range status {
				status[j].Load.Running = float64(i % 7)
			}
			e.Estimates(status, now)
		}
	})
	b.Run("probed", func(b *testing.B) {
		for b.Loop() {
			for _, s := range status {
				e.changed(s.Name)
			}
			e.Estimates(status, now)
		}
	})
}
