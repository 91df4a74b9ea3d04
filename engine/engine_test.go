package engine

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestParseEngines(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		file, engine string
		want         Load
	}{
		{"vllm.prom", "vllm", Load{Running: 7, Waiting: 3, KVUsage: 0.625, QueueCount: 100, QueueSum: 42.5, ITLCount: 5000, ITLSum: 40, PromptTokens: 1234500, GenerationTokens: 456789}},
		{"vllm-v0.prom", "vllm", Load{Running: 2, Waiting: 0, KVUsage: 0.125, QueueCount: nan, QueueSum: nan, ITLCount: 10, ITLSum: 0.1, PromptTokens: 1000, GenerationTokens: 2000}},
		// Two data-parallel ranks, each repeated per tensor rank: counted once per dp rank.
		{"sglang.prom", "sglang", Load{Running: 7, Waiting: 2, KVUsage: 0.4, QueueCount: 10, QueueSum: 2.5, ITLCount: 500, ITLSum: 11, PromptTokens: 1500, GenerationTokens: 500}},
		{"tgi.prom", "tgi", Load{Running: 12, Waiting: 5, KVUsage: nan, QueueCount: 40, QueueSum: 8, ITLCount: nan, ITLSum: nan, PromptTokens: 40960, GenerationTokens: 10240}},
		{"llamacpp.prom", "llamacpp", Load{Running: 1, Waiting: 2, KVUsage: 0.25, QueueCount: nan, QueueSum: nan, ITLCount: 2500, ITLSum: 31.25, PromptTokens: 5000, GenerationTokens: 2500}},
		{"trtllm-triton.prom", "trtllm", Load{Running: 6, Waiting: 3, KVUsage: 0.25, QueueCount: nan, QueueSum: nan, ITLCount: nan, ITLSum: nan, PromptTokens: nan, GenerationTokens: nan}},
		{"trtllm-serve.prom", "trtllm", Load{Running: nan, Waiting: nan, KVUsage: nan, QueueCount: 7, QueueSum: 0.7, ITLCount: nan, ITLSum: nan, PromptTokens: nan, GenerationTokens: nan}},
		{"nim.prom", "nim", Load{Running: 5, Waiting: 1, KVUsage: 0.4, QueueCount: nan, QueueSum: nan, ITLCount: nan, ITLSum: nan, PromptTokens: 100, GenerationTokens: 50}},
		// headroom sim declares its time scale; its times are virtual.
		{"sim.prom", "vllm", Load{Running: 3, Waiting: 1, KVUsage: 0.5, QueueCount: 4, QueueSum: 2, ITLCount: 508, ITLSum: 6.35, PromptTokens: 4096, GenerationTokens: 512, TimeScale: 20}},
	}
	// Only engines that count a prompt as its prefill completes say how much
	// prefill a window held.
	prefilled := map[string]float64{"vllm": 1, "llamacpp": 1, "sglang": nan, "tgi": nan, "trtllm": nan, "nim": nan}
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-9 }
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := Parse(f, "auto")
			if err != nil {
				t.Fatal(err)
			}
			if got.Engine != tc.engine {
				t.Errorf("engine %q, want %q", got.Engine, tc.engine)
			}
			w := tc.want
			if w.TimeScale == 0 {
				w.TimeScale = 1
			}
			if !same(got.Running, w.Running) || !same(got.Waiting, w.Waiting) || !same(got.KVUsage, w.KVUsage) ||
				!same(got.QueueCount, w.QueueCount) || !same(got.QueueSum, w.QueueSum) ||
				!same(got.ITLCount, w.ITLCount) || !same(got.ITLSum, w.ITLSum) ||
				!same(got.PromptTokens, w.PromptTokens) || !same(got.PrefilledTokens, prefilled[tc.engine]*w.PromptTokens) || !same(got.GenerationTokens, w.GenerationTokens) || got.TimeScale != w.TimeScale {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
		})
	}
}

func TestParseBadPages(t *testing.T) {
	for _, f := range []string{"garbage.prom", "truncated.prom"} {
		r, err := os.Open("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse(r, "auto")
		r.Close()
		if err == nil {
			t.Errorf("%s: no error", f)
		}
	}
	if _, err := Parse(strings.NewReader("# TYPE up gauge\nup 1\n"), "auto"); err == nil || !strings.Contains(err.Error(), "no metrics of a known engine") {
		t.Errorf("page of no engine: %v", err)
	}
}

func TestScrapeBoundsHugePages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		line := []byte("vllm:num_requests_running{model_name=\"m\",pad=\"" + strings.Repeat("x", 1000) + "\"} 1\n")
		for written := 0; written < MaxPage+len(line); written += len(line) {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	_, err := Scrape(context.Background(), srv.Client(), srv.URL, "", "auto")
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("huge page: %v", err)
	}
}

func TestParseRejectsPoisonedValues(t *testing.T) {
	tests := []struct{ name, page, err string }{
		{"NaN running", "vllm:num_requests_running NaN\n", "has value NaN"},
		{"+Inf running", "vllm:num_requests_running +Inf\n", "has value +Inf"},
		{"negative waiting", "vllm:num_requests_running 1\nvllm:num_requests_waiting -3\n", "has value -3"},
		{"-Inf queue sum", "# TYPE vllm:request_queue_time_seconds histogram\nvllm:request_queue_time_seconds_bucket{le=\"+Inf\"} 1\nvllm:request_queue_time_seconds_sum -Inf\nvllm:request_queue_time_seconds_count 1\n", "has value -Inf"},
		{"duplicate series", "vllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_running{engine=\"0\"} 9\n", "duplicate series"},
		{"JSON body", "{}", "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.page), "auto")
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
	// A poisoned value in a family headroom does not read costs nothing.
	if _, err := Parse(strings.NewReader("vllm:num_requests_running 1\nunrelated_gauge -Inf\n"), "auto"); err != nil {
		t.Errorf("unread family: %v", err)
	}
}

// FuzzParse: every engine page, however garbled, gives a Load or an error.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"vllm.prom", "sglang.prom", "tgi.prom", "llamacpp.prom", "trtllm-triton.prom", "garbage.prom", "truncated.prom"} {
		b, err := os.ReadFile("testdata/" + file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, page []byte) {
		l, err := Parse(strings.NewReader(string(page)), "auto")
		if err == nil && (l.Running < 0 || l.Waiting < 0 || math.IsInf(l.InFlight(), 0)) {
			t.Fatalf("accepted a poisoned load %+v", l)
		}
	})
}
