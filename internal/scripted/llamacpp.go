// Package scripted holds HTTP handlers that behave as real engines do where
// they differ from the simulator, for tests of the code that meets them.
package scripted

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/headroom-dev/headroom/sim"
)

// LlamaCpp wraps a simulator so it answers as llama.cpp's server does where
// prompt sizing is concerned: /tokenize takes {"content": ...} and counts the
// text alone, without the chat template; a chat-shaped body gets
// {"tokens": []}; and a prompt longer than contextTokens is refused with
// HTTP 400. Everything else is the simulator's.
func LlamaCpp(h http.Handler, contextTokens int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
