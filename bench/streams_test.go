package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// simTTFT reads the simulator's own TTFT histogram: count and sum.
func simTTFT(tb testing.TB, url string) (count, sum float64) {
	tb.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	var h *dto.Histogram
	if mf, ok := mfs["vllm:time_to_first_token_seconds"]; ok && len(mf.GetMetric()) > 0 {
		h = mf.GetMetric()[0].GetHistogram()
	}
	if h == nil {
		tb.Fatal("simulator has no TTFT histogram")
	}
	return float64(h.GetSampleCount()), h.GetSampleSum()
}

// BenchmarkStreams measures how many concurrent streams one bench process
// drives while its TTFT stays true: the mean TTFT the bench measured against
// the mean the simulator itself recorded for the same requests, in real time.
// The simulator runs in the same process, so the figure is a lower bound.
//
//	go test ./bench -run '^$' -bench Streams -benchtime 1x
func BenchmarkStreams(b *testing.B) {
	for _, n := range []int{1, 4, 16, 64, 256, 512, 1024} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			ts := httptest.NewServer(simHandler(b, "tiny", 1))
			b.Cleanup(ts.Close)
			r := newRunner(target{url: ts.URL})
			if err := r.Prober.Resolve(context.Background()); err != nil {
				b.Fatal(err)
			}
			r.scale = 1
			p := Plan{Output: 128}
			k := Key{Mode: "closed", Context: 1024, Output: 128, Concurrency: n}
			// One warm-up round sizes the prompt and opens the connections.
			if _, err := r.measure(context.Background(), Plan{Output: 128, RequestsPerCell: n}, k); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				c0, s0 := simTTFT(b, ts.URL)
				c, err := r.measure(context.Background(), p, k)
				if err != nil {
					b.Fatal(err)
				}
				c1, s1 := simTTFT(b, ts.URL)
				c.summarise()
				if len(c.Requests) != int(c1-c0) || c.SuccessRate != 1 {
					b.Fatalf("%d of %d requests succeeded, the simulator saw %.0f", len(c.Requests), p.Requests(k), c1-c0)
				}
				delta := 1000 * (c.Stats["ttft_s"].Mean - (s1-s0)/(c1-c0))
				b.ReportMetric(delta, "ttft-excess-ms")
				b.ReportMetric(math.Abs(delta), "ttft-abs-excess-ms")
				b.ReportMetric(c.Throughput, "tok/s")
			}
		})
	}
}
