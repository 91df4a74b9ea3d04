// Package scripted holds HTTP handlers that behave as real engines do where
// they differ from the simulator, for tests of the code that meets them.
package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/headroom-dev/headroom/engine"

	"github.com/headroom-dev/headroom/sim"
)

// LlamaCpp wraps a simulator so it answers as llama.cpp's server does where
// prompt sizing is concerned: /tokenize takes {"content": ...} and counts the
// text alone, without the chat template; a chat-shaped body gets
// {"tokens": []}; and a prompt longer than contextTokens is refused with
// HTTP 400. /props gives contextTokens as its n_ctx, and /metrics the
// simulator's readings under llama.cpp's names as its server serves them
// today (no KV usage). Everything else is the simulator's.
func LlamaCpp(h http.Handler, contextTokens int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/props":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"default_generation_settings": map[string]any{"n_ctx": contextTokens}, "total_slots": 1})
			return
		case "/metrics":
			llamaCppMetrics(w, h)
			return
		}
		body, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var q struct {
			Content  *string `json:"content"`
			Prompt   *string `json:"prompt"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &q)
		switch r.URL.Path {
		case "/tokenize":
			tokens := []int{}
			if q.Content != nil {
				tokens = make([]int, sim.CountTokens(*q.Content))
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"tokens": tokens})
			return
		case "/v1/chat/completions", "/v1/completions":
			n := 0
			if q.Prompt != nil {
				n = sim.CountTokens(*q.Prompt)
			} else {
				contents := make([]string, len(q.Messages))
				for i, m := range q.Messages {
					contents[i] = m.Content
				}
				n = sim.ChatTokens(contents)
			}
			if n > contextTokens {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// llamaCppMetrics writes the simulator's readings as llama.cpp's server
// names them, with the simulator's own info (its time scale) beside them.
func llamaCppMetrics(w http.ResponseWriter, h http.Handler) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	page := rec.Body.String()
	l, err := engine.Parse(strings.NewReader(page), "vllm")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	for _, m := range []struct {
		name, kind string
		v          float64
	}{
		{"llamacpp:prompt_tokens_total", "counter", l.PromptTokens},
		{"llamacpp:tokens_predicted_total", "counter", l.ITLCount},
		{"llamacpp:tokens_predicted_seconds_total", "counter", l.ITLSum},
		{"llamacpp:requests_processing", "gauge", l.Running},
		{"llamacpp:requests_deferred", "gauge", l.Waiting},
	} {
		fmt.Fprintf(&b, "# TYPE %s %s\n%s %g\n", m.name, m.kind, m.name, m.v)
	}
	for _, line := range strings.SplitAfter(page, "\n") {
		if strings.HasPrefix(line, "headroom_sim_info") || strings.HasPrefix(line, "# TYPE headroom_sim_info") {
			b.WriteString(line)
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = io.WriteString(w, b.String())
}
