package collector

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/probe"
)

// sameText checks that c's WriteText writes, family by family, what the
// registry gathers of it written by expfmt, in the text format and in
// OpenMetrics: the same lines in the same order, and no family twice.
func sameText(t *testing.T, c TextWriter) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, om := range []bool{false, true} {
		var gathered strings.Builder
		for _, mf := range mfs {
			write := expfmt.MetricFamilyToText
			if om {
				write = func(w io.Writer, mf *dto.MetricFamily) (int, error) { return expfmt.MetricFamilyToOpenMetrics(w, mf) }
			}
			if _, err := write(&gathered, mf); err != nil {
				t.Fatal(err)
			}
		}
		var page bytes.Buffer
		w := bufio.NewWriter(&page)
		if err := c.WriteText(w, om); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		want, got := blocks(t, gathered.String()), blocks(t, page.String())
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			t.Fatalf("OpenMetrics %v: families written %v, gathered %v", om, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for n, w := range want {
			if got[n] != w {
				t.Errorf("OpenMetrics %v: %s written\n%s\ngathered\n%s", om, n, got[n], w)
			}
		}
		// And the page parses as one.
		if om {
			continue
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := parser.TextToMetricFamilies(bytes.NewReader(page.Bytes())); err != nil {
			t.Errorf("page does not parse: %v", err)
		}
	}
}

// blocks splits a page into its families' lines, by the name on their
// HELP line.
func blocks(t *testing.T, page string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var name string
	var block strings.Builder
	flush := func() {
		if name != "" {
			if _, dup := out[name]; dup {
				t.Errorf("family %s written twice", name)
			}
			out[name] = block.String()
		}
		block.Reset()
	}
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			flush()
			name, _, _ = strings.Cut(rest, " ")
		}
		block.WriteString(line)
	}
	flush()
	return out
}

// Probes writes as text what the registry gathers of it, in both layouts,
// with every kind of series, failures and label values that need escaping.
func TestProbesWriteText(t *testing.T) {
	for _, nativeOnly := range []bool{false, true} {
		t.Run(fmt.Sprint("nativeOnly=", nativeOnly), func(t *testing.T) {
			p := NewProbes(prometheus.NewRegistry(), nativeOnly)
			sameText(t, p) // empty
			now := time.Unix(1000, 0)
			for i, target := range []string{"b", "a", `odd "\` + "\nname", "c"} {
				for _, sc := range []string{"s2", "s1"} {
					p.Init(target, sc, i%2 == 0)
					ok := probe.Result{Outcome: probe.Success, TTFT: time.Duration(i+1) * 300 * time.Millisecond, E2E: 2 * time.Second, Decode: 1700 * time.Millisecond,
						PromptTokens: 1024, CompletionTokens: 128, MaxGap: 40 * time.Millisecond}
					p.Observe(target, sc, ok, time.Duration(i)*50*time.Millisecond, now)
					p.Observe(target, sc, probe.Result{Outcome: probe.Timeout}, -1, now)
					if i != 1 {
						p.ObserveCalibration(target, sc, ok)
						p.ObserveCalibration(target, sc, probe.Result{Outcome: probe.HTTPError})
						p.AddBurst(target, sc)
					}
					p.AddBusy(target, time.Duration(i)*time.Second)
				}
			}
			sameText(t, p)
		})
	}
}

// BenchmarkProbesText is BenchmarkProbesPage's fleet written by WriteText.
func BenchmarkProbesText(b *testing.B) {
	for _, nativeOnly := range []bool{false, true} {
		b.Run(map[bool]string{false: "both", true: "native"}[nativeOnly], func(b *testing.B) {
			p := NewProbes(prometheus.NewRegistry(), nativeOnly)
			fleet(p)
			var page bytes.Buffer
			w := bufio.NewWriter(&page)
			scrape := func() {
				page.Reset()
				w.Reset(&page)
				if err := p.WriteText(w, false); err != nil {
					b.Fatal(err)
				}
				w.Flush()
			}
			scrape()
			for b.Loop() {
				scrape()
			}
			b.ReportMetric(float64(page.Len())/1e6, "page-MB")
			b.ReportMetric(float64(bytes.Count(page.Bytes(), []byte("\n"))), "lines")
		})
	}
}

// Capacity writes as text what the registry gathers of it: estimates with
// a capacity and a load, a bound, none, and an infinite upper bound.
func TestCapacityWriteText(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	us := []capacity.UseCase{{Name: "rag", Scenario: "s2", TTFTMax: 2, DecodeMin: 15}, {Name: "chat", Scenario: "s1", TTFTMax: 1, ITLMax: .05, E2EMax: 8}}
	slos := func(lower ...float64) []capacity.SLO {
		var out []capacity.SLO
		for i, l := range lower {
			out = append(out, capacity.SLO{Name: []string{"ttft_seconds", "itl_seconds", "e2e_seconds"}[i], Lower: l})
		}
		return out
	}
	ests := []capacity.Estimate{
		{Target: "b", UseCase: "rag", Capacity: 12.5, Lower: 10, Upper: inf, Free: 3, Ratio: 0.24, Margin: 0.5, Samples: 40, SLOs: slos(10, nan)},
		{Target: "a", UseCase: "rag", Capacity: nan, Lower: 2, Upper: inf, Bound: "lower", Free: nan, Ratio: nan, Margin: -0.1, Samples: 3, SLOs: slos(2)},
		{Target: "a", UseCase: "chat", Capacity: nan, Lower: nan, Upper: nan, Free: nan, Ratio: nan, Margin: nan, SLOs: slos(nan, nan, nan)},
		{Target: `q"\` + "\n", UseCase: "chat", Capacity: 3, Lower: 1, Upper: 4, Free: 0, Ratio: 0, Margin: 0, Samples: 9, SLOs: slos(1, 2, 3)},
	}
	sameText(t, NewCapacity(func() []capacity.UseCase { return us }, func() []capacity.Estimate { return nil }))
	sameText(t, NewCapacity(func() []capacity.UseCase { return us }, func() []capacity.Estimate { return ests }))
}
