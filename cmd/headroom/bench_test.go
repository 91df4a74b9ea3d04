package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-dev/headroom/sim"
)

// benchSim is a small simulator at 20x, counting the paths its clients
// ask for. Faster, a request's deadline in wall time (its virtual one over
// the scale) is shorter than a loaded CI machine's scheduling delay.
func benchSim(t *testing.T) (url string, paths func() map[string]int) {
	t.Helper()
	s := sim.NewServer(sim.Tiny, 20, "vllm")
	go s.Run(t.Context())
	h := s.Handler()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/prometheus/metrics" { // where trtllm-serve serves its page
			r.URL.Path = "/metrics"
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

// benchConfig is one scenario and use case at a short context: the sweep's
// cells are the grid's alone.
func benchConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "headroom.yml")
	cfg := "targets: []\nscenarios: [{name: s, input_tokens: 256, output_tokens: 8}]\nuse_cases: [{name: u, scenario: s, ttft_max: 10s}]\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func reportModes(t *testing.T, dir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Cells []struct {
			Mode string `json:"mode"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, c := range r.Cells {
		modes[c.Mode]++
	}
	return modes
}

// --rate alone runs its open-loop cells and no closed-loop ladder, as
// vllm bench serve --request-rate does; with --concurrency the ladder
// comes too (issue 39).
func TestBenchRateAlone(t *testing.T) {
	url, _ := benchSim(t)
	for _, tc := range []struct {
		name string
		args []string
		want map[string]int
	}{
		{"rate alone", []string{"--rate", "8"}, map[string]int{"rate": 1}},
		{"rate and a ladder", []string{"--rate", "8", "--concurrency", "1,2"}, map[string]int{"rate": 1, "closed": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string{"bench", "--url", url, "--config.file", benchConfig(t), "--output-tokens", "8", "--requests-per-cell", "20", "--warmup", "0", "--out", out}, tc.args...)
			if code := run(args); code != 0 {
				t.Fatalf("bench exited %d", code)
			}
			got := reportModes(t, out)
			if len(got) != len(tc.want) || got["rate"] != tc.want["rate"] || got["closed"] != tc.want["closed"] {
				t.Errorf("cells by mode %v, want %v", got, tc.want)
			}
		})
	}
}

// `bench --engine trtllm` reads the server's page where trtllm-serve
// serves it, /prometheus/metrics, the daemon's default for the engine.
func TestBenchTRTLLMMetricsPath(t *testing.T) {
	url, paths := benchSim(t)
	out := t.TempDir()
	if code := run([]string{"bench", "--url", url, "--engine", "trtllm", "--config.file", benchConfig(t), "--concurrency", "1", "--output-tokens", "8", "--warmup", "0", "--out", out}); code != 0 {
		t.Fatalf("bench exited %d", code)
	}
	if p := paths(); p["/prometheus/metrics"] == 0 || p["/metrics"] != 0 {
		t.Errorf("metrics pages read: /prometheus/metrics %d times, /metrics %d times", p["/prometheus/metrics"], p["/metrics"])
	}
}

// `bench compare A B --out D` writes D/compare.html and D/compare.md, and
// takes no flag of the sweep's.
func TestBenchCompareOut(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp")
	a, b := "../../bench/testdata/report.json", "../../bench/testdata/report.json"
	if code := run([]string{"bench", "compare", a, b, "--out", out, "--label.a", "before", "--label.b", "after"}); code != 0 {
		t.Fatalf("compare exited %d", code)
	}
	for _, f := range []string{"compare.html", "compare.md"} {
		body, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "before") || !strings.Contains(string(body), "Capacity by use case") {
			t.Errorf("%s lacks the labels or the capacity table:\n%.400s", f, body)
		}
	}
	if code := run([]string{"bench", "compare", a, b, "--out", out, "--url", "http://127.0.0.1:1"}); code != 2 {
		t.Errorf("compare accepted a sweep flag: exit %d, want 2", code)
	}
}
