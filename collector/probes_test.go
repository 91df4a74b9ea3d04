package collector

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/probe"
)

// families gathers reg by name.
func families(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// sample is the value of a counter or gauge series of reg, with its labels
// as name=value pairs sorted by name; NaN for none.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	for _, m := range families(t, reg)[name].GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		if slices.Equal(got, labels) {
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return math.NaN()
}

func TestObserveRecordsLatencyOnlyForSuccess(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewProbes(reg, false)
	p.Init("a", "s", false)
	ok := probe.Result{Outcome: probe.Success, TTFT: 300 * time.Millisecond, E2E: 2 * time.Second, Decode: 1700 * time.Millisecond,
		PromptTokens: 1024, CompletionTokens: 128, TokensFromUsage: true}
	p.Observe("a", "s", ok, 50*time.Millisecond, time.Unix(1000, 0))
	for _, o := range []probe.Outcome{probe.Timeout, probe.HTTPError, probe.ShortOutput, probe.StreamError, probe.ConnectError, probe.PromptMismatch, probe.UsageMismatch} {
		p.Observe("a", "s", probe.Result{Outcome: o, Err: errors.New("x"), TTFT: time.Hour, E2E: time.Hour}, time.Hour, time.Unix(2000, 0))
	}
	p.Observe("a", "s", probe.Result{Outcome: probe.Canceled}, -1, time.Unix(3000, 0))

	if n := len(families(t, reg)["headroom_probe_ttft_seconds"].GetMetric()); n != 1 {
		t.Fatalf("%d ttft series", n)
	}
	count := func(name string) uint64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return 0
	}
	for _, h := range []string{"headroom_probe_ttft_seconds", "headroom_probe_e2e_seconds", "headroom_probe_itl_seconds",
		"headroom_probe_decode_tokens_per_second", "headroom_probe_queue_wait_seconds", "headroom_probe_prefill_tokens_per_second"} {
		if c := count(h); c != 1 {
			t.Errorf("%s has %d samples, want 1: failed probes must not record latency", h, c)
		}
	}
	if got := sample(t, reg, "headroom_probes_total", "result=timeout", "scenario=s", "target=a"); got != 1 {
		t.Errorf("timeout count %v", got)
	}
	if got := sample(t, reg, "headroom_probe_last_success_timestamp_seconds", "scenario=s", "target=a"); got != 1000 {
		t.Errorf("last success %v, want 1000 (a failure must not move it)", got)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP headroom_probes_total Lone probes by result.
# TYPE headroom_probes_total counter
headroom_probes_total{result="connect_error",scenario="s",target="a"} 1
headroom_probes_total{result="http_error",scenario="s",target="a"} 1
headroom_probes_total{result="prompt_mismatch",scenario="s",target="a"} 1
headroom_probes_total{result="short_output",scenario="s",target="a"} 1
headroom_probes_total{result="stream_error",scenario="s",target="a"} 1
headroom_probes_total{result="success",scenario="s",target="a"} 1
headroom_probes_total{result="timeout",scenario="s",target="a"} 1
headroom_probes_total{result="usage_mismatch",scenario="s",target="a"} 1
`), "headroom_probes_total"); err != nil {
		t.Error(err)
	}
	p.Forget("a")
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("%d series left after Forget (%v)", n, err)
	}
}

// A calibration burst's probes land in the headroom_calibration_* series
// alone: the lone probes' series, which the SLO panels and rules read, keep
// what lone probes met.
func TestObserveCalibrationKeepsBurstsApart(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewProbes(reg, false)
	p.Init("a", "s", true)
	p.Init("b", "s", false)
	lone := probe.Result{Outcome: probe.Success, TTFT: 300 * time.Millisecond, E2E: 2 * time.Second, Decode: 1700 * time.Millisecond,
		PromptTokens: 1024, CompletionTokens: 128}
	p.Observe("a", "s", lone, -1, time.Unix(1000, 0))
	burst := lone
	burst.TTFT, burst.E2E = 9*time.Second, 11*time.Second
	for range 3 {
		p.ObserveCalibration("a", "s", burst)
	}
	p.ObserveCalibration("a", "s", probe.Result{Outcome: probe.Timeout, Err: errors.New("x")})
	p.ObserveCalibration("a", "s", probe.Result{Outcome: probe.Canceled})

	sum := func(name string) (count uint64, sum float64) {
		for _, mf := range families(t, reg) {
			if mf.GetName() == name {
				h := mf.GetMetric()[0].GetHistogram()
				// Classic buckets on the lone probes' alone (operations.md's cardinality).
				if classic := len(h.GetBucket()) > 0; classic == strings.HasPrefix(name, "headroom_calibration") {
					t.Errorf("%s: %d classic buckets", name, len(h.GetBucket()))
				}
				return h.GetSampleCount(), h.GetSampleSum()
			}
		}
		return 0, 0
	}
	for name, want := range map[string]float64{"headroom_probe_ttft_seconds": 0.3, "headroom_calibration_ttft_seconds": 27,
		"headroom_probe_e2e_seconds": 2, "headroom_calibration_e2e_seconds": 33} {
		wantCount := uint64(1)
		if strings.HasPrefix(name, "headroom_calibration") {
			wantCount = 3
		}
		if c, s := sum(name); c != wantCount || math.Abs(s-want) > 1e-9 {
			t.Errorf("%s: %d samples summing %v, want %d summing %v", name, c, s, wantCount, want)
		}
	}
	for _, name := range []string{"headroom_probe_itl_seconds", "headroom_probe_decode_tokens_per_second"} {
		if c, _ := sum(name); c != 1 {
			t.Errorf("%s: %d samples, want the lone probe's 1", name, c)
		}
	}
	for _, name := range []string{"headroom_calibration_itl_seconds", "headroom_calibration_decode_tokens_per_second"} {
		if c, _ := sum(name); c != 3 {
			t.Errorf("%s: %d samples, want the burst's 3", name, c)
		}
	}
	if got := sample(t, reg, "headroom_probes_total", "result=success", "scenario=s", "target=a"); got != 1 {
		t.Errorf("headroom_probes_total success %v, want the lone probe's 1", got)
	}
	if got := sample(t, reg, "headroom_probes_total", "result=timeout", "scenario=s", "target=a"); !math.IsNaN(got) {
		t.Errorf("headroom_probes_total timeout %v, want none: the burst's timeout is calibration's", got)
	}
	for result, want := range map[string]float64{"success": 3, "timeout": 1} {
		if got := sample(t, reg, "headroom_calibration_probes_total", "result="+result, "scenario=s", "target=a"); got != want {
			t.Errorf("headroom_calibration_probes_total %s %v, want %v", result, got, want)
		}
	}
	// Only a target that may burst has a bursts counter before its first;
	// results are series once they happen, a lone probe's success from
	// the start.
	mfs := families(t, reg)
	for name, want := range map[string]int{"headroom_calibration_probes_total": 2, "headroom_calibration_bursts_total": 1, "headroom_probes_total": 2} {
		if n := len(mfs[name].GetMetric()); n != want {
			t.Errorf("%d %s series, want %d", n, name, want)
		}
	}
	p.Forget("a")
	for name, mf := range families(t, reg) {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "target" && l.GetValue() == "a" {
					t.Errorf("%s of a left after Forget", name)
				}
			}
		}
	}
}

func TestNativeOnlyHistograms(t *testing.T) {
	for _, nativeOnly := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		p := NewProbes(reg, nativeOnly)
		p.Observe("a", "s", probe.Result{Outcome: probe.Success, TTFT: 300 * time.Millisecond, E2E: 2 * time.Second}, -1, time.Unix(1000, 0))
		for _, mf := range families(t, reg) {
			if mf.GetName() != "headroom_probe_ttft_seconds" {
				continue
			}
			h := mf.GetMetric()[0].GetHistogram()
			if classic := len(h.GetBucket()) > 0; classic == nativeOnly {
				t.Errorf("nativeOnly %v: %d classic buckets", nativeOnly, len(h.GetBucket()))
			}
			if h.Schema == nil || h.GetSampleCount() != 1 {
				t.Errorf("nativeOnly %v: native schema %v, count %d", nativeOnly, h.Schema, h.GetSampleCount())
			}
		}
	}
}
