package engine

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each engine version's page, as served (issue 39 lists today's names), is
// read for the load (running and waiting), the queue, the KV cache and the
// decode (the inter-token histogram or what stands for it); NaN where that
// version serves no such reading.
func TestParseEngines(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		file, engine string
		want         Load
	}{
		{"vllm-0.6.prom", "vllm", Load{Running: 2, Waiting: 0, KVUsage: 0.125, KVTokens: nan, QueueCount: nan, QueueSum: nan, ITLCount: 10, ITLSum: 0.1, PromptTokens: 1000, GenerationTokens: 2000}},
		// The deprecated names carry other values: the current ones are read.
		{"vllm-0.11.prom", "vllm", Load{Running: 12, Waiting: 4, KVUsage: 0.75, KVTokens: nan, QueueCount: 20, QueueSum: 3, ITLCount: 2000, ITLSum: 50, PromptTokens: 80000, GenerationTokens: 20000}},
		{"vllm-0.12.prom", "vllm", Load{Running: 7, Waiting: 3, KVUsage: 0.625, KVTokens: 8192 * 16, QueueCount: 100, QueueSum: 42.5, ITLCount: 5000, ITLSum: 40, PromptTokens: 1234500, GenerationTokens: 456789}},
		// Two replicas: requests summed, KV usage their mean.
		{"vllm-ray.prom", "vllm", Load{Running: 8, Waiting: 1, KVUsage: 0.4, KVTokens: nan, QueueCount: 10, QueueSum: 2, ITLCount: 400, ITLSum: 12, PromptTokens: 10000, GenerationTokens: 1000}},
		{"vllm-kserve.prom", "vllm", Load{Running: 9, Waiting: 2, KVUsage: 0.45, KVTokens: nan, QueueCount: 12, QueueSum: 6, ITLCount: 800, ITLSum: 16, PromptTokens: 4200, GenerationTokens: 800}},
		// Two data-parallel ranks, each repeated per tensor rank: counted once per dp rank.
		{"sglang-server.prom", "sglang", Load{Running: 7, Waiting: 2, KVUsage: 0.4, KVTokens: nan, QueueCount: 10, QueueSum: 2.5, ITLCount: 500, ITLSum: 11, PromptTokens: 1500, GenerationTokens: 500}},
		// The router's page: its two workers summed.
		{"sglang-router.prom", "sglang", Load{Running: 10, Waiting: 4, KVUsage: 0.6, KVTokens: 500000, QueueCount: 8, QueueSum: 4, ITLCount: 1000, ITLSum: 25, PromptTokens: 3000, GenerationTokens: 1000}},
		{"tgi.prom", "tgi", Load{Running: 12, Waiting: 5, KVUsage: nan, KVTokens: nan, QueueCount: 40, QueueSum: 8, ITLCount: nan, ITLSum: nan, PromptTokens: 40960, GenerationTokens: 10240}},
		{"llamacpp-n_past_max.prom", "llamacpp", Load{Running: 1, Waiting: 2, KVUsage: 0.25, KVTokens: nan, QueueCount: nan, QueueSum: nan, ITLCount: 2500, ITLSum: 31.25, PromptTokens: 5000, GenerationTokens: 2500}},
		// No KV usage any more: unknown, not 0.
		{"llamacpp.prom", "llamacpp", Load{Running: 4, Waiting: 0, KVUsage: nan, KVTokens: nan, QueueCount: nan, QueueSum: nan, ITLCount: 4000, ITLSum: 80, PromptTokens: 12000, GenerationTokens: 4000}},
		{"trtllm-triton.prom", "trtllm", Load{Running: 6, Waiting: 3, KVUsage: 0.25, KVTokens: nan, QueueCount: nan, QueueSum: nan, ITLCount: nan, ITLSum: nan, PromptTokens: nan, GenerationTokens: nan}},
		{"trtllm-serve.prom", "trtllm", Load{Running: nan, Waiting: nan, KVUsage: nan, KVTokens: nan, QueueCount: 7, QueueSum: 0.7, ITLCount: 7, ITLSum: 0.14, PromptTokens: nan, GenerationTokens: nan}},
		{"nim.prom", "nim", Load{Running: 5, Waiting: 1, KVUsage: 0.4, KVTokens: nan, QueueCount: nan, QueueSum: nan, ITLCount: nan, ITLSum: nan, PromptTokens: 100, GenerationTokens: 50}},
		// headroom sim declares its time scale; its times are virtual.
		{"sim.prom", "vllm", Load{Running: 3, Waiting: 1, KVUsage: 0.5, KVTokens: nan, QueueCount: 4, QueueSum: 2, ITLCount: 508, ITLSum: 6.35, PromptTokens: 4096, GenerationTokens: 512, TimeScale: 20}},
		// A page of `headroom sim serve --fleet`, as a fleet replica reads
		// one per target every engine_scrape_interval (BenchmarkParseFleetPage).
		{"sim-fleet.prom", "vllm", Load{Running: 0, Waiting: 0, KVUsage: 0, KVTokens: 142422 * 16, QueueCount: 5, QueueSum: 0, ITLCount: 251, ITLSum: 1.7464342038308303, PromptTokens: 205823, GenerationTokens: 256, TimeScale: 20}},
	}
	// The model where the running-requests series names it.
	models := map[string]string{"vllm-0.6.prom": "meta-llama/Llama-3.1-8B-Instruct", "vllm-0.11.prom": "meta-llama/Llama-3.3-70B-Instruct",
		"vllm-kserve.prom": "meta-llama/Llama-3.3-70B-Instruct", "sglang-router.prom": "Qwen/Qwen3-Coder-Next-FP8", "vllm-0.12.prom": "Qwen/Qwen3-Coder-30B-A3B-Instruct", "vllm-ray.prom": "meta-llama/Llama-3.3-70B-Instruct",
		"sglang-server.prom": "Qwen/Qwen3-Coder-Next-FP8", "nim.prom": "meta/llama-3.1-8b-instruct", "sim.prom": "sim/tiny",
		"sim-fleet.prom": "Qwen3-Coder-30B-A3B-Instruct (FP8)"}
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
			if got.Model != models[tc.file] {
				t.Errorf("model %q, want %q", got.Model, models[tc.file])
			}
			w := tc.want
			if w.TimeScale == 0 {
				w.TimeScale = 1
			}
			for _, r := range []struct {
				name      string
				got, want float64
			}{
				{"running", got.Running, w.Running}, {"waiting", got.Waiting, w.Waiting},
				{"queue count", got.QueueCount, w.QueueCount}, {"queue sum", got.QueueSum, w.QueueSum},
				{"KV usage", got.KVUsage, w.KVUsage}, {"KV tokens", got.KVTokens, w.KVTokens},
				{"ITL count", got.ITLCount, w.ITLCount}, {"ITL sum", got.ITLSum, w.ITLSum},
				{"prompt tokens", got.PromptTokens, w.PromptTokens}, {"prefilled tokens", got.PrefilledTokens, prefilled[tc.engine] * w.PromptTokens},
				{"generation tokens", got.GenerationTokens, w.GenerationTokens}, {"time scale", got.TimeScale, w.TimeScale},
			} {
				if !same(r.got, r.want) {
					t.Errorf("%s: %g, want %g", r.name, r.got, r.want)
				}
			}
		})
	}
}

// Every fixture under testdata/ is in the table above: a page added for
// a new version is read, not only kept.
func TestEveryFixtureRead(t *testing.T) {
	src, err := os.ReadFile("engine_test.go")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/*.prom")
	for _, f := range files {
		if name := filepath.Base(f); !strings.Contains(string(src), `{"`+name+`", "`) && name != "garbage.prom" && name != "truncated.prom" {
			t.Errorf("%s is not in TestParseEngines", name)
		}
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
	files, _ := filepath.Glob("testdata/*.prom")
	for _, file := range files {
		b, err := os.ReadFile(file)
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
