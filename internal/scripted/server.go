package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// lookahead bounds how far the server runs a copy of its world ahead to
// find the next probe token: past it, it wakes and looks again.
const lookahead = 30.0

// Server serves a law over HTTP as vLLM does, OpenAI-compatible streaming
// completions and /metrics in vLLM's names, with its production (if any)
// running inside. All its timing is time.Now and timers, so it runs in
// virtual time inside a testing/synctest bubble.
type Server struct {
	law   *Law
	start time.Time
	wake  chan struct{}
	mux   *http.ServeMux

	mu      sync.Mutex
	w       *world
	streams map[int64]chan event
}

// NewServer builds a server of the law; prod nil for an idle one. Its
// clock starts now; Run moves it.
func NewServer(l Law, prod *Production) *Server {
	s := &Server{law: &l, start: time.Now(), wake: make(chan struct{}, 1), streams: map[int64]chan event{}}
	s.w = newWorld(s.law, prod)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("POST /v1/chat/completions", s.complete)
	s.mux.HandleFunc("POST /v1/completions", s.complete)
	s.mux.HandleFunc("POST /tokenize", s.tokenize)
	s.mux.HandleFunc("GET /metrics", s.metrics)
	return s
}

// ServeHTTP answers 503 to everything while the server restarts.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.law.down(s.vnow()) {
		http.Error(w, "restarting", http.StatusServiceUnavailable)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) vnow() float64 { return time.Since(s.start).Seconds() }

// Run moves the world along with the clock until ctx ends: it sleeps until
// the next token of a request it streams, or until a request wakes it.
func (s *Server) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	due := 0.0
	for {
		s.mu.Lock()
		now := math.Max(s.vnow(), due)
		s.sync(now)
		at := s.w.firstLoud(now + lookahead)
		s.mu.Unlock()
		var fire <-chan time.Time
		if !math.IsInf(at, 1) {
			timer.Reset(time.Until(s.start.Add(time.Duration(at * float64(time.Second)))))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-fire:
			// The clock stands where the timer was due, which a
			// conversion to nanoseconds may put a hair before at.
			due = at
		case <-s.wake:
			due = 0
		}
	}
}

// sync moves the world to now and hands the streams their events. The
// caller holds mu.
func (s *Server) sync(now float64) {
	for _, ev := range s.w.advance(now, nil) {
		if ch, ok := s.streams[ev.id]; ok {
			ch <- ev
			if ev.kind == finished || ev.kind == failed {
				delete(s.streams, ev.id)
			}
		}
	}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"scripted"}]}`, s.law.Family)
}

// body is what the server reads of a completion or tokenize request.
type body struct {
	Prompt   *string `json:"prompt"`
	Messages []struct {
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

// tokens counts a token per word, chat template none: /tokenize and usage
// agree, and prompt sizing converges on the first fit.
func (b body) tokens() int {
	n := 0
	if b.Prompt != nil {
		n = words(*b.Prompt)
	}
	for _, m := range b.Messages {
		n += words(m.Content)
	}
	return n
}

func words(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		space := s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

func readBody(w http.ResponseWriter, r *http.Request) (body, bool) {
	var b body
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&b); err != nil || b.Prompt == nil && len(b.Messages) == 0 {
		http.Error(w, `{"object":"error","message":"want a JSON body with a prompt or messages","code":400}`, http.StatusBadRequest)
		return b, false
	}
	return b, true
}

// tokenize answers in vLLM's shape.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"count":%d}`, b.tokens())
}

// complete streams a completion, chat or not: a chunk per token, the
// finish reason, the usage and [DONE].
func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	b, ok := readBody(w, r)
	if !ok {
		return
	}
	output := max(b.MaxTokens, b.MaxCompletionTokens)
	prompt := b.tokens()
	if output < 1 || !s.law.fits(prompt, output) {
		http.Error(w, fmt.Sprintf(`{"object":"error","message":"%d prompt and %d output tokens do not fit","code":400}`, prompt, output), http.StatusBadRequest)
		return
	}
	ch := make(chan event, output+2)
	s.mu.Lock()
	s.sync(s.vnow())
	id := s.w.add(prompt, output, true)
	s.streams[id] = ch
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	chat := r.URL.Path == "/v1/chat/completions"
	object, field := "text_completion", `"text":"tok "`
	if chat {
		object, field = "chat.completion.chunk", `"delta":{"content":"tok "}`
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	for {
		var ev event
		select {
		case <-r.Context().Done():
			s.mu.Lock()
			s.w.eng.cancel(id)
			delete(s.streams, id)
			s.mu.Unlock()
			return
		case ev = <-ch:
		}
		switch ev.kind {
		case failed:
			panic(http.ErrAbortHandler) // the connection drops, as a restarting server's do
		case finished:
			finish := `{"index":0,"text":"","finish_reason":"length"}`
			if chat {
				finish = `{"index":0,"delta":{},"finish_reason":"length"}`
			}
			fmt.Fprintf(w, "data: {\"object\":%q,\"choices\":[%s]}\n\n", object, finish)
			fmt.Fprintf(w, "data: {\"object\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n",
				object, prompt, output, prompt+output)
			flush()
			return
		default:
			fmt.Fprintf(w, "data: {\"object\":%q,\"choices\":[{\"index\":0,%s,\"finish_reason\":null}]}\n\n", object, field)
			flush()
		}
	}
}

// metrics writes the engine's state in vLLM's names.
func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.sync(s.vnow())
	g := s.w.eng.reading()
	s.mu.Unlock()
	var b strings.Builder
	const model = `model_name="scripted"`
	gauge := func(name string, v float64, labels string) {
		fmt.Fprintf(&b, "# TYPE %s gauge\n%s{%s} %g\n", name, name, labels, v)
	}
	counter := func(name string, v float64) {
		fmt.Fprintf(&b, "# TYPE %s counter\n%s{%s} %g\n", name, name, model, v)
	}
	gauge("vllm:num_requests_running", float64(g.running), model)
	gauge("vllm:num_requests_waiting", float64(g.waiting), model)
	counter("vllm:prompt_tokens_total", g.prompt)
	counter("vllm:generation_tokens_total", g.gen)
	if l := s.law; l.KVTokens > 0 {
		gauge("vllm:kv_cache_usage_perc", float64(g.kvUsed)/float64(l.KVTokens), model)
		gauge("vllm:cache_config_info", 1, fmt.Sprintf(`block_size="%d",num_gpu_blocks="%d"`, l.BlockSize, l.KVTokens/l.BlockSize))
	}
	if s.law.ITLHistogram {
		const name = "vllm:inter_token_latency_seconds"
		fmt.Fprintf(&b, "# TYPE %s histogram\n", name)
		n := 0.0
		for i, le := range itlBuckets {
			n += g.itlBucket[i]
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"%g\"} %g\n", name, model, le, n)
		}
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %g\n%s_sum{%s} %g\n%s_count{%s} %g\n", name, model, g.itlCount, name, model, g.itlSum, name, model, g.itlCount)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = io.WriteString(w, b.String())
}
