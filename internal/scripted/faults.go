package scripted

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MetricsPage is a healthy vLLM metrics page: nothing running or waiting.
const MetricsPage = "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"

// Stall blocks until the client gives up: a server that accepted the
// request and went quiet. It reads the body first: only then does the
// server notice the client hang up.
func Stall(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// Fixed serves a fixed completion stream of chunks content chunks and, if
// usage > 0, a usage chunk counting usage completion tokens and prompt
// prompt tokens, whatever was asked. It reads the request first, as a
// server does.
func Fixed(chunks, prompt, usage int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range chunks {
			fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`+"\n\n")
		}
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`+"\n\n")
		if usage > 0 {
			fmt.Fprintf(w, `data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`+"\n\n", prompt, usage)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// Fake answers /v1/models (model m) and /metrics (MetricsPage) like a
// healthy server, has no tokenizer, and serves chat completions with
// completions.
func Fake(completions http.HandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"data":[{"id":"m"}]}`) })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, MetricsPage) })
	mux.HandleFunc("POST /v1/chat/completions", completions)
	return mux
}

// WithPath serves h, except path, which f answers.
func WithPath(h http.Handler, path string, f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			f(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Models answers /v1/models with id, or with the key it was sent for "".
func Models(id string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id == "" {
			id = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		fmt.Fprintf(w, `{"data":[{"id":%q}]}`, id)
	}
}

// Leak is the longest part of a secret that text carries, its first 6
// characters or more (what a cut could leave), or "" where there is none.
func Leak(text string, secrets ...string) string {
	for _, s := range secrets {
		for k := len(s); k >= 6; k-- {
			if strings.Contains(text, s[:k]) {
				return s[:k]
			}
		}
	}
	return ""
}
