package collector

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/headroom-dev/headroom/probe"
)

func TestObserveRecordsLatencyOnlyForSuccess(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewProbes(reg, false)
	p.Init("a", "s")
	ok := probe.Result{Outcome: probe.Success, TTFT: 300 * time.Millisecond, E2E: 2 * time.Second, Decode: 1700 * time.Millisecond,
		PromptTokens: 1024, CompletionTokens: 128, TokensFromUsage: true}
	p.Observe("a", "s", ok, 50*time.Millisecond, time.Unix(1000, 0))
	for _, o := range []probe.Outcome{probe.Timeout, probe.HTTPError, probe.ShortOutput, probe.StreamError, probe.ConnectError, probe.PromptMismatch, probe.UsageMismatch} {
		p.Observe("a", "s", probe.Result{Outcome: o, Err: errors.New("x"), TTFT: time.Hour, E2E: time.Hour}, time.Hour, time.Unix(2000, 0))
	}
	p.Observe("a", "s", probe.Result{Outcome: probe.Canceled}, -1, time.Unix(3000, 0))

	if n := testutil.CollectAndCount(p.ttft); n != 1 {
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
	if got := testutil.ToFloat64(p.total.WithLabelValues("a", "s", "timeout")); got != 1 {
		t.Errorf("timeout count %v", got)
	}
	if got := testutil.ToFloat64(p.lastSuccess.WithLabelValues("a", "s")); got != 1000 {
		t.Errorf("last success %v, want 1000 (a failure must not move it)", got)
	}
	if err := testutil.CollectAndCompare(p.total, strings.NewReader(`
# HELP headroom_probes_total Probes by result.
# TYPE headroom_probes_total counter
headroom_probes_total{result="connect_error",scenario="s",target="a"} 1
headroom_probes_total{result="http_error",scenario="s",target="a"} 1
headroom_probes_total{result="prompt_mismatch",scenario="s",target="a"} 1
headroom_probes_total{result="short_output",scenario="s",target="a"} 1
headroom_probes_total{result="stream_error",scenario="s",target="a"} 1
headroom_probes_total{result="success",scenario="s",target="a"} 1
headroom_probes_total{result="timeout",scenario="s",target="a"} 1
headroom_probes_total{result="usage_mismatch",scenario="s",target="a"} 1
`)); err != nil {
		t.Error(err)
	}
	p.Forget("a")
	if n := testutil.CollectAndCount(p.total); n != 0 {
		t.Errorf("%d series left after Forget", n)
	}
}

func TestNativeOnlyHistograms(t *testing.T) {
	for _, nativeOnly := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		p := NewProbes(reg, nativeOnly)
		p.Observe("a", "s", probe.Result{Outcome: probe.Success, TTFT: 300 * time.Millisecond, E2E: 2 * time.Second}, -1, time.Unix(1000, 0))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
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
