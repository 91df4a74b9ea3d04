package exposition

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

var keepVLLM = func(name string) bool { return strings.HasPrefix(name, "vllm:") }

func TestFamiliesRejectsHostilePages(t *testing.T) {
	tests := []struct {
		name, page, err string
		limit           int64 // 0: 1,000 bytes
	}{
		// prometheus/common before v0.69.0 dereferenced nil on these: the process died.
		{"json object", "{}", "truncated", 0},
		{"json object with newline", "{}\n", "no metric name", 0},
		{"braces then value", "{} 1\n", "no metric name", 0},
		{"nameless sample in braces", "vllm:a 1\n{x=\"1\"} 1\n", "line 2 has no metric name", 0},
		{"truncated last line", "vllm:num_requests_running 1\nvllm:num_req", "truncated in line 2", 0},
		{"duplicate series", "vllm:num_requests_running{a=\"1\"} 1\nvllm:num_requests_running{a=\"1\"} 2\n", "duplicate series", 0},
		{"over the limit", strings.Repeat("other_metric 1\n", 100), "larger than", 0},
		{"line too long", "vllm:x{a=\"" + strings.Repeat("x", maxLine) + "\"} 1\n", "longer than", 2 * maxLine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = 1000
			}
			_, err := Families(strings.NewReader(tc.page), limit, keepVLLM)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestFamiliesKeepsOnlyWhatIsRead(t *testing.T) {
	page := `# HELP vllm:num_requests_running Running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
# A free comment is dropped.
# TYPE other_histogram histogram
other_histogram_bucket{le="+Inf"} 1
other_histogram_sum 1
other_histogram_count 1
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{le="1"} 2
vllm:request_queue_time_seconds_bucket{le="+Inf"} 3
vllm:request_queue_time_seconds_sum 4.5
vllm:request_queue_time_seconds_count 3
broken line that is not read {{{
`
	// One byte at a time: the reader must not depend on how the body arrives.
	mfs, err := Families(iotest.OneByteReader(strings.NewReader(page)), 1<<20, keepVLLM)
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 2 || mfs["other_histogram"] != nil {
		t.Fatalf("kept %d families: %v", len(mfs), mfs)
	}
	h := mfs["vllm:request_queue_time_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 4.5 {
		t.Errorf("histogram %v", h)
	}
}

// TestFamiliesWithoutBuckets: a histogram's sum and count are read as
// Families reads them, its buckets are not; a kept family whose own name
// ends in _bucket stays.
func TestFamiliesWithoutBuckets(t *testing.T) {
	page := `# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{model_name="m",le="1"} 2
vllm:request_queue_time_seconds_bucket{model_name="m",le="+Inf"} 3
vllm:request_queue_time_seconds_sum{model_name="m"} 4.5
vllm:request_queue_time_seconds_count{model_name="m"} 3
vllm:request_queue_time_seconds_sum{model_name="n"} 1
vllm:request_queue_time_seconds_count{model_name="n"} 2
# TYPE vllm:token_bucket gauge
vllm:token_bucket 7
`
	keep := func(name string) bool {
		return name == "vllm:request_queue_time_seconds" || name == "vllm:token_bucket"
	}
	mfs, err := FamiliesWithoutBuckets(strings.NewReader(page), 1<<20, keep)
	if err != nil {
		t.Fatal(err)
	}
	ms := mfs["vllm:request_queue_time_seconds"].GetMetric()
	if len(ms) != 2 {
		t.Fatalf("%d series, want 2", len(ms))
	}
	for i, want := range []struct{ count, sum float64 }{{3, 4.5}, {2, 1}} {
		h := ms[i].GetHistogram()
		if float64(h.GetSampleCount()) != want.count || h.GetSampleSum() != want.sum || len(h.GetBucket()) != 0 {
			t.Errorf("series %d: %v, want count %g, sum %g, no buckets", i, h, want.count, want.sum)
		}
	}
	if g := mfs["vllm:token_bucket"].GetMetric(); len(g) != 1 || g[0].GetGauge().GetValue() != 7 {
		t.Errorf("vllm:token_bucket: %v", g)
	}
	all, err := Families(strings.NewReader(page), 1<<20, keep)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(all["vllm:request_queue_time_seconds"].GetMetric()[0].GetHistogram().GetBucket()); n != 2 {
		t.Errorf("Families: %d buckets, want 2", n)
	}
}

// FuzzFamilies: no page, however garbled, panics or hangs the reader.
func FuzzFamilies(f *testing.F) {
	for _, s := range []string{"{}", "{} 1\n", "vllm:a 1\n", "# TYPE vllm:h histogram\nvllm:h_bucket{le=\"+Inf\"} 1\nvllm:h_count 1\nvllm:h_sum 1\n",
		"vllm:a{x=\"1\"} NaN\n", "vllm:a{", "#\n# HELP\n# TYPE vllm:a\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, page []byte) {
		_, _ = Families(bytes.NewReader(page), 1<<20, keepVLLM)
	})
}

// BenchmarkFamiliesLargePage reads a 10 MB page of which headroom keeps two
// series: memory follows what is kept (go test -bench . -benchmem ./internal/exposition).
func BenchmarkFamiliesLargePage(b *testing.B) {
	var page bytes.Buffer
	page.WriteString("vllm:num_requests_running 1\nvllm:num_requests_waiting 2\n")
	for i := 0; page.Len() < 10<<20; i++ {
		page.WriteString("unrelated_metric_total{shard=\"")
		page.WriteString(strings.Repeat("x", 40))
		page.WriteString("\",i=\"")
		page.WriteString(string(rune('a' + i%26)))
		page.WriteString("\"} 1\n")
	}
	b.SetBytes(int64(page.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Families(bytes.NewReader(page.Bytes()), 32<<20, keepVLLM); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFamiliesEnginePage reads a simulator's engine page, as each
// scrape of a target does: what it allocates is paid per target every
// engine_scrape_interval (go test -bench EnginePage -benchmem ./internal/exposition).
func BenchmarkFamiliesEnginePage(b *testing.B) {
	page, err := os.ReadFile("../../engine/testdata/sim.prom")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Families(bytes.NewReader(page), 32<<20, keepVLLM); err != nil {
			b.Fatal(err)
		}
	}
}
