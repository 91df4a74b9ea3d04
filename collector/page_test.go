package collector

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/headroom-dev/headroom/probe"
)

// fleet records what 1,000 targets x 5 scenarios have probed after a
// while: 30 lone probes and 3 bursts of 4 each.
func fleet(p *Probes) {
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(1e9, 0)
	for tg := range 1000 {
		for sc := range 5 {
			target, scenario := fmt.Sprintf("target-%04d", tg), fmt.Sprintf("ctx-%d", sc)
			p.Init(target, scenario, true)
			res := func() probe.Result {
				ttft := time.Duration((0.2 + 3*r.Float64()) * float64(time.Second))
				return probe.Result{Outcome: probe.Success, TTFT: ttft, E2E: ttft + 2*time.Second, Decode: 2 * time.Second,
					PromptTokens: 1024, CompletionTokens: 64, MaxGap: time.Duration(r.Float64() * float64(100*time.Millisecond))}
			}
			for range 30 {
				p.Observe(target, scenario, res(), time.Duration(r.Float64()*float64(time.Second)), now)
			}
			for range 12 {
				p.ObserveCalibration(target, scenario, res())
			}
			p.AddBusy(target, time.Minute)
		}
	}
}

// BenchmarkProbesPage is the probe metrics of 1,000 targets x 5
// scenarios (fleet): the live heap they hold, and what one scrape of them
// as text allocates and writes, for each histogram layout
// (go test ./collector -run '^$' -bench ProbesPage -benchtime 3x).
func BenchmarkProbesPage(b *testing.B) {
	for _, nativeOnly := range []bool{false, true} {
		b.Run(map[bool]string{false: "both", true: "native"}[nativeOnly], func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			reg := prometheus.NewRegistry()
			fleet(NewProbes(reg, nativeOnly))
			runtime.GC()
			runtime.ReadMemStats(&after)
			live := float64(after.HeapAlloc-before.HeapAlloc) / 1e6
			var page bytes.Buffer
			scrape := func() {
				page.Reset()
				mfs, err := reg.Gather()
				if err != nil {
					b.Fatal(err)
				}
				for _, mf := range mfs {
					if _, err := expfmt.MetricFamilyToText(&page, mf); err != nil {
						b.Fatal(err)
					}
				}
			}
			scrape() // grows the page's buffer: no scrape's own allocation
			for b.Loop() {
				scrape()
			}
			b.ReportMetric(live, "live-MB")
			b.ReportMetric(float64(page.Len())/1e6, "page-MB")
			b.ReportMetric(float64(bytes.Count(page.Bytes(), []byte("\n"))), "lines")
			runtime.KeepAlive(reg)
		})
	}
}
