package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/sim"
)

// The simulator's tokenizer is not whitespace-based and its chat template adds
// tokens, so word counts are a poor guess; sizing must still land within 1%.
func TestPromptSizing(t *testing.T) {
	for _, withTokenizer := range []bool{true, false} {
		for _, api := range []string{"chat", "completions"} {
			for _, target := range []int{1024, 8192, 32768} {
				name := map[bool]string{true: "tokenize", false: "usage-feedback"}[withTokenizer] + "/" + api
				t.Run(name, func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					s := sim.NewServer(sim.Tiny, 1000, "vllm")
					go s.Run(ctx)
					h := s.Handler()
					if !withTokenizer {
						h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							if r.URL.Path == "/tokenize" {
								http.NotFound(w, r)
								return
							}
							s.Handler().ServeHTTP(w, r)
						})
					}
					srv := httptest.NewServer(h)
					defer srv.Close()
					p := NewProber(Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, api, "", "auto")
					sc := Scenario{Name: "s", InputTokens: target, OutputTokens: 4, Cold: true, Timeout: 10 * time.Second}
					// With a tokenizer the first probe must be right; with usage
					// feedback alone (short calibration requests, then the
					// probes' own counts), the second.
					probes := 1
					if !withTokenizer {
						probes = 2
					}
					var r Result
					for range probes {
						r = p.Probe(ctx, sc)
						if r.Outcome != Success {
							t.Fatalf("probe: %s %v", r.Outcome, r.Err)
						}
					}
					if !within(r.PromptTokens, target, Tolerance) {
						t.Fatalf("prompt of %d tokens after %d probes, want %d ± 1%%", r.PromptTokens, probes, target)
					}
				})
			}
		}
	}
}

func TestParseTokenCount(t *testing.T) {
	tests := []struct {
		body string
		want int
		err  bool
	}{
		{`{"count": 5, "max_model_len": 10, "tokens": [1,2,3,4,5]}`, 5, false},                        // vLLM
		{`{"tokens": [1,2,3], "count": 3}`, 3, false},                                                 // SGLang
		{`{"tokens": [1,2]}`, 2, false},                                                               // llama.cpp
		{`[{"id":1,"text":"a","start":0,"stop":1},{"id":2,"text":"b","start":1,"stop":2}]`, 2, false}, // TGI
		{`{"detail": "Not Found"}`, 0, true},
		{`<html>`, 0, true},
	}
	for _, tc := range tests {
		got, err := parseTokenCount([]byte(tc.body))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseTokenCount(%s) = %d, %v; want %d, error %v", tc.body, got, err, tc.want, tc.err)
		}
	}
}
