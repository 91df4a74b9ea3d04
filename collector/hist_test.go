package collector

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// A hist writes what client_golang's Histogram with the probe histograms'
// options writes for the same observations: counts, sum, classic buckets,
// schema, zero bucket, spans and deltas, through the halving of a
// histogram that passes 160 native buckets.
func TestHistAsClientGolang(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 8))
	draws := map[string]func() float64{
		"latencies":     func() float64 { return 0.05 + 3*r.Float64() },
		"speeds":        func() float64 { return 5 + 200*r.ExpFloat64() },
		"a wide spread": func() float64 { return math.Exp(r.NormFloat64() * 12) }, // passes 160 buckets
		"bounds and specials": func() float64 {
			return []float64{0, 1, 2, 8, 0.5, 0.25, math.Inf(1), -0.5, 1e-300, math.NaN(), 300, 0.005}[r.IntN(12)]
		},
	}
	for name, draw := range draws {
		for _, bounds := range [][]float64{LatencyBuckets, nil} {
			want := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: bounds,
				NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160, NativeHistogramMinResetDuration: time.Hour})
			got := newHist(bounds, time.Now())
			for i := range 3000 {
				v := draw()
				want.Observe(v)
				got.observe(v, bounds)
				if i%500 != 499 {
					continue
				}
				var w, g dto.Metric
				if err := want.Write(&w); err != nil {
					t.Fatal(err)
				}
				got.write(&g, bounds)
				// Compared but for the created time: each its own.
				w.Histogram.CreatedTimestamp, g.Histogram.CreatedTimestamp = nil, nil
				if math.IsNaN(w.Histogram.GetSampleSum()) && math.IsNaN(g.Histogram.GetSampleSum()) {
					w.Histogram.SampleSum, g.Histogram.SampleSum = proto.Float64(0), proto.Float64(0)
				}
				if !proto.Equal(&w, &g) {
					t.Fatalf("%s, %d classic bounds, after %d observations:\n got %v\nwant %v", name, len(bounds), i+1, &g, &w)
				}
			}
			if halved := got.schema < nativeSchema; halved != (name == "a wide spread") {
				t.Errorf("%s: schema %d at the end", name, got.schema)
			}
		}
	}
}
