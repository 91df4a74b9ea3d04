package capacity

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkMemoRetained reports the heap a memo keeps per use case's fit
// (retained-B/fit): a daemon keeps one for every target and use case,
// 5,000 at 1,000 targets and the default use cases.
func BenchmarkMemoRetained(b *testing.B) {
	l := server{ttft: func(q, w, d float64) float64 { return 0.2 + 0.3*(q-1+w+d) }, itl: func(b, a float64) float64 { return 0.01 + 0.001*b }}
	ps := window(l, loads(120, 1, 6), []int{3, 6, 12, 24}, 0.03, 1)
	u := UseCase{Name: "c", Statistic: "p90", TTFTMax: 5, DecodeMin: 15}
	const fits = 100
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := NewMemo()
		// Each read at the loads a busy server's production wanders
		// through between two probes, as the daemon reads at every scrape.
		for i := range fits {
			for l := range 64 {
				m.Seeded(fmt.Sprint(i), u, ps, nil, Production{InFlight: 3 + float64(l)/4})
			}
		}
		// Twice: the twins' pooled working memory (scratches), which no
		// fit keeps, goes at the second collection.
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(m)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/fits, "retained-B/fit")
	}
}
