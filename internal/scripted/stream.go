package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Stream is an OpenAI-compatible chat server with scripted timings: each
// request's first token is flushed TTFT after it arrives, then one token
// every ITL, as many as max_tokens. It records when it began to flush each
// request's first and last token, so a client's times can be set against the
// server's own: read before the write, never after the client has the token
// (read after the flush returned, a busy machine once put it 0.3 ms past the
// client's).
type Stream struct {
	TTFT, ITL time.Duration

	mu    sync.Mutex
	times []Flushes
}

// Flushes is one streamed request as the server saw it: when its handler
// began, and when it began to write its first and its last token. The
// instants carry the monotonic clock, so a client in the same process can
// compare its own with them.
type Flushes struct {
	Arrived, First, Last time.Time
}

// Flushed returns the requests streamed to their end since the last reset,
// in the order they ended. Sizing requests (one token) are no stream and are
// left out.
func (s *Stream) Flushed() []Flushes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.times)
}

// ServeHTTP answers /v1/models, /v1/chat/completions and /stats.
func (s *Stream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"scripted","object":"model"}]}`)
	case "/v1/chat/completions":
		s.complete(w, r)
	case "/stats":
		s.stats(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Stream) complete(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var q struct {
		MaxTokens int `json:"max_tokens"`
		Messages  []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || q.MaxTokens < 1 {
		http.Error(w, `{"error":{"message":"want a JSON body with max_tokens"}}`, http.StatusBadRequest)
		return
	}
	prompt := 0 // a token per word: linear, as the probes' sizing expects
	for _, m := range q.Messages {
		prompt += len(strings.Fields(m.Content))
	}
	fl, _ := w.(http.Flusher)
	chunk := `data: {"object":"chat.completion.chunk","model":"scripted","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n"
	t := time.NewTimer(s.TTFT - time.Since(arrived))
	defer t.Stop()
	f := Flushes{Arrived: arrived}
	for i := range q.MaxTokens {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		f.Last = time.Now()
		if i == 0 {
			f.First = f.Last
			w.Header().Set("Content-Type", "text/event-stream")
		}
		fmt.Fprint(w, chunk)
		if fl != nil {
			fl.Flush()
		}
		t.Reset(s.ITL)
	}
	if q.MaxTokens > 1 { // sizing requests are no stream to time
		s.mu.Lock()
		s.times = append(s.times, f)
		s.mu.Unlock()
	}
	fmt.Fprintf(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"+
		"data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", prompt, q.MaxTokens)
}

// stats reports the first flushes since the last reset (POST resets).
func (s *Stream) stats(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	first := make([]time.Duration, len(s.times))
	for i, f := range s.times {
		first[i] = f.First.Sub(f.Arrived)
	}
	if r.Method == http.MethodPost {
		s.times = s.times[:0]
	}
	s.mu.Unlock()
	out := map[string]float64{"requests": float64(len(first))}
	if len(first) > 0 {
		slices.Sort(first)
		var sum time.Duration
		for _, d := range first {
			sum += d
		}
		out["first_flush_mean_ms"] = float64(sum.Microseconds()) / 1000 / float64(len(first))
		out["first_flush_p99_ms"] = float64(first[(len(first)*99)/100].Microseconds()) / 1000
	}
	_ = json.NewEncoder(w).Encode(out)
}
