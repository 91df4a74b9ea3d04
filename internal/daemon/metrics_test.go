package daemon

import (
	"compress/gzip"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/probe"
)

// /metrics in the text format and OpenMetrics, written straight from the
// probe and capacity collectors, says what the registry's formats say: the
// same families and lines as the protobuf page (what Prometheus fetches
// with native histograms) written in each, and the same gzipped.
func TestMetricsFormatsAgree(t *testing.T) {
	for _, nativeOnly := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "other_gauge", Help: "Another family."}, []string{"x"})
		g.WithLabelValues("1").Set(2)
		reg.MustRegister(g)
		p := collector.NewProbes(nil, nativeOnly)
		now := time.Unix(1000, 0)
		for _, target := range []string{"b", "a"} {
			p.Init(target, "s", true)
			p.Observe(target, "s", probe.Result{Outcome: probe.Success, TTFT: time.Second, E2E: 2 * time.Second, Decode: time.Second, PromptTokens: 64, CompletionTokens: 16}, time.Millisecond, now)
			p.Observe(target, "s", probe.Result{Outcome: probe.Timeout}, -1, now)
			p.ObserveCalibration(target, "s", probe.Result{Outcome: probe.Success, TTFT: time.Second, E2E: 2 * time.Second})
			p.AddBurst(target, "s")
			p.AddBusy(target, time.Second)
		}
		us := []capacity.UseCase{{Name: "u", Scenario: "s", TTFTMax: 2}}
		ests := []capacity.Estimate{{Target: "b", UseCase: "u", Capacity: 3, Lower: 2, Upper: math.Inf(1), Free: 1, Ratio: 1. / 3, Margin: .2, Samples: 5,
			SLOs: []capacity.SLO{{Name: "ttft_seconds", Lower: 2}}}}
		c := collector.NewCapacity(func() []capacity.UseCase { return us }, func() []capacity.Estimate { return ests })
		srv := httptest.NewServer(metricsHandler(slog.New(slog.DiscardHandler), reg, p, c))
		get := func(accept, encoding string) (*http.Response, []byte) {
			req, _ := http.NewRequest("GET", srv.URL, nil)
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			// Set, the transport neither asks for gzip nor undoes it.
			req.Header.Set("Accept-Encoding", encoding)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp, body
		}
		resp, page := get("", "identity")
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
			t.Errorf("text page's content type %q", ct)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		text, err := parser.TextToMetricFamilies(strings.NewReader(string(page)))
		if err != nil {
			t.Fatal(err)
		}
		resp, pb := get("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "identity")
		dec := expfmt.NewDecoder(strings.NewReader(string(pb)), expfmt.ResponseFormat(resp.Header))
		proto := map[string]*dto.MetricFamily{}
		for {
			var mf dto.MetricFamily
			if err := dec.Decode(&mf); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			proto[mf.GetName()] = &mf
		}
		if !slices.Equal(slices.Sorted(maps.Keys(text)), slices.Sorted(maps.Keys(proto))) {
			t.Fatalf("nativeOnly %v: text families %v, protobuf %v", nativeOnly, slices.Sorted(maps.Keys(text)), slices.Sorted(maps.Keys(proto)))
		}
		for name, mf := range proto {
			var a, b strings.Builder
			expfmt.MetricFamilyToText(&a, mf)
			expfmt.MetricFamilyToText(&b, text[name])
			if a.String() != b.String() {
				t.Errorf("nativeOnly %v: %s\nprotobuf\n%s\ntext\n%s", nativeOnly, name, a.String(), b.String())
			}
		}
		for _, want := range []string{"headroom_probe_ttft_seconds_count", "headroom_capacity_requests", "headroom_calibration_bursts_total", "other_gauge"} {
			if !strings.Contains(string(page), want) {
				t.Errorf("nativeOnly %v: no %s on the text page", nativeOnly, want)
			}
		}
		resp, zipped := get("", "gzip")
		zr, err := gzip.NewReader(strings.NewReader(string(zipped)))
		if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("gzip: %v, Content-Encoding %q", err, resp.Header.Get("Content-Encoding"))
		}
		if unzipped, _ := io.ReadAll(zr); string(unzipped) != string(page) {
			t.Error("the gzipped page differs")
		}
		resp, om := get("application/openmetrics-text;version=1.0.0", "identity")
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") {
			t.Errorf("OpenMetrics page: content type %q", ct)
		}
		var want strings.Builder
		for _, name := range slices.Sorted(maps.Keys(proto)) {
			if _, err := expfmt.MetricFamilyToOpenMetrics(&want, proto[name]); err != nil {
				t.Fatal(err)
			}
		}
		want.WriteString("# EOF\n")
		if got := sortedLines(string(om)); got != sortedLines(want.String()) || !strings.HasSuffix(string(om), "\n# EOF\n") {
			t.Errorf("nativeOnly %v: OpenMetrics page\n%s\nprotobuf's, written in OpenMetrics\n%s", nativeOnly, om, want.String())
		}
		srv.Close()
	}
}

// sortedLines is a page's lines in order: two pages of the same families
// written in different orders have the same.
func sortedLines(page string) string {
	return strings.Join(slices.Sorted(strings.Lines(page)), "")
}
