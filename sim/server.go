package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves the OpenAI streaming API as vLLM speaks it, backed by the
// engine model running against the wall clock, time-scaled.
type Server struct {
	profile Profile
	scale   float64
	style   string // vllm or sglang metric names
	start   time.Time

	mu     sync.Mutex
	eng    *Engine
	nextID int64
	live   map[int64]*liveReq
	wake   chan struct{}

	// finished holds the token counters as of the last step whose time has
	// passed: Step does a whole step's work at its start, and a server
	// counts it at its end, as a reader of /metrics mid-step must see it.
	finished struct{ prompt, gen float64 }

	reg     *prometheus.Registry
	ttft    prometheus.Observer
	itl     prometheus.Observer
	queue   prometheus.Observer
	handler http.Handler
}

type liveReq struct {
	events    chan event
	submitted float64
	last      float64
	// first and end are when its first token and its end came, virtual
	// seconds; tokens how many it got. Written by Run before it sends the
	// Finished event, read by the waiter after it.
	first, end float64
	tokens     int
	// quiet: only its end is delivered. A background user reads nothing
	// of its stream, and waking it at every step would cost more than the
	// engine does.
	quiet bool
}

type event struct {
	kind EventKind
	t    float64
}

// NewServer builds a simulated server. timeScale > 1 runs faster than real time.
func NewServer(p Profile, timeScale float64, metricsStyle string) *Server {
	s := &Server{profile: p, scale: timeScale, style: metricsStyle, start: time.Now(), eng: NewEngine(p.Params),
		live: map[int64]*liveReq{}, wake: make(chan struct{}, 1), reg: prometheus.NewRegistry()}
	s.registerMetrics()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.completions("chat"))
	mux.HandleFunc("POST /v1/completions", s.completions("completions"))
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /tokenize", s.tokenize)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	s.handler = mux
	return s
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// vnow is the virtual time now.
func (s *Server) vnow() float64 { return time.Since(s.start).Seconds() * s.scale }

// wall is when virtual time t happens.
func (s *Server) wall(t float64) time.Time {
	return s.start.Add(time.Duration(t / s.scale * float64(time.Second)))
}

// submit enqueues a request and returns its event channel; a quiet one
// gets only its Finished event.
func (s *Server) submit(arrived float64, prompt, output int, quiet bool) (int64, *liveReq, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eng.Idle() {
		s.eng.AdvanceTo(s.vnow())
	}
	s.nextID++
	id := s.nextID
	if err := s.eng.SubmitAt(arrived, id, prompt, output); err != nil {
		return 0, nil, err
	}
	// A request that arrives mid-step waits for the step's end inside the
	// engine, and that wait is part of its TTFT: time it from its arrival
	// at the API server, parsing and tokenising included, as vLLM does.
	lr := &liveReq{events: make(chan event, output+4), submitted: math.Min(arrived, s.eng.Now()), quiet: quiet}
	s.live[id] = lr
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return id, lr, nil
}

func (s *Server) cancel(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eng.Cancel(id)
	delete(s.live, id)
}

// Run steps the engine in time with the wall clock until ctx ends.
func (s *Server) Run(ctx context.Context) {
	type out struct {
		lr *liveReq
		ev event
	}
	type observation struct {
		h prometheus.Observer
		v float64
	}
	var batch []out
	var observed []observation // at the step's end, with its events
	emit := func(id int64, k EventKind, t float64) {
		lr, ok := s.live[id]
		if !ok {
			return
		}
		switch k {
		case Admitted:
			observed = append(observed, observation{s.queue, t})
			return
		case FirstToken:
			lr.last, lr.first = t, t
			lr.tokens++
			observed = append(observed, observation{s.ttft, t - lr.submitted})
		case Token:
			observed = append(observed, observation{s.itl, t - lr.last})
			lr.last = t
			lr.tokens++
		case Finished:
			lr.end = t
			delete(s.live, id)
		}
		if lr.quiet && k != Finished {
			return
		}
		batch = append(batch, out{lr, event{k, t}})
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// sleepUntil waits for the wall time of virtual time t and says how
	// far virtual time got: t itself once it is due, as a clock that stands
	// still while nothing waits (testing/synctest's) never lets the time
	// read back reach it, or less when a request woke it early.
	sleepUntil := func(t float64) (float64, bool) {
		d := time.Until(s.wall(t))
		if d <= 0 {
			return t, ctx.Err() == nil
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return 0, false
		case <-timer.C:
			return t, true
		case <-s.wake:
			return math.Min(t, s.vnow()), true
		}
	}
	for ctx.Err() == nil {
		s.mu.Lock()
		if s.eng.Idle() {
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			}
			continue
		}
		if w := s.eng.NextWake(); w > s.eng.Now() {
			s.mu.Unlock()
			at, ok := sleepUntil(w)
			if !ok {
				return
			}
			s.mu.Lock()
			s.eng.AdvanceTo(at)
			s.mu.Unlock()
			continue
		}
		batch, observed = batch[:0], observed[:0]
		s.eng.Step(emit)
		end := s.eng.Now()
		s.mu.Unlock()
		if d := time.Until(s.wall(end)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		s.mu.Lock()
		s.finished.prompt, s.finished.gen = s.eng.PromptTokens, s.eng.GenTokens
		s.mu.Unlock()
		for _, o := range observed {
			o.h.Observe(o.v)
		}
		for _, o := range batch {
			o.lr.events <- o.ev
		}
	}
}

type completionRequest struct {
	Model    string `json:"model"`
	Prompt   any    `json:"prompt"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	MinTokens           int  `json:"min_tokens"`
	IgnoreEOS           bool `json:"ignore_eos"`
	Stream              bool `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// vllmError writes an error in vLLM's shape.
func vllmError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "error", "message": msg, "type": http.StatusText(code), "param": nil, "code": code})
}

func text(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []any:
		out := ""
		for _, p := range t {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					out += s
				}
			}
		}
		return out
	}
	return ""
}

func (q completionRequest) promptTokens(api string) (int, bool) {
	if api == "chat" {
		if len(q.Messages) == 0 {
			return 0, false
		}
		cs := make([]string, len(q.Messages))
		for i, m := range q.Messages {
			cs[i] = text(m.Content)
		}
		return ChatTokens(cs), true
	}
	p, ok := q.Prompt.(string)
	return CountTokens(p), ok && p != ""
}

var words = []string{"the ", "model ", "streams ", "tokens ", "back ", "to ", "a ", "user "}

func (s *Server) completions(api string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		arrived := s.vnow()
		var q completionRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&q); err != nil {
			vllmError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
		if q.Model != "" && q.Model != s.profile.Model {
			vllmError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", q.Model))
			return
		}
		prompt, ok := q.promptTokens(api)
		if !ok {
			vllmError(w, http.StatusBadRequest, "prompt or messages required")
			return
		}
		maxTokens := 16
		if q.MaxTokens != nil {
			maxTokens = *q.MaxTokens
		} else if q.MaxCompletionTokens != nil {
			maxTokens = *q.MaxCompletionTokens
		}
		if maxTokens < 1 {
			vllmError(w, http.StatusBadRequest, "max_tokens must be at least 1, got "+strconv.Itoa(maxTokens))
			return
		}
		// Without ignore_eos or min_tokens the simulated model stops early, as a
		// real one reaches its end-of-sequence token.
		output := maxTokens
		if !q.IgnoreEOS && q.MinTokens < maxTokens {
			output = max(q.MinTokens, 1, maxTokens*3/5)
		}
		if prompt+output > s.profile.Params.KVCapacity {
			vllmError(w, http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens.", s.profile.Params.KVCapacity, prompt+output))
			return
		}
		id, lr, err := s.submit(arrived, prompt, output, false)
		if err != nil {
			vllmError(w, http.StatusBadRequest, err.Error())
			return
		}
		finish := "stop"
		if output == maxTokens {
			finish = "length"
		}
		usage := map[string]int{"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}
		if !q.Stream {
			s.wait(r.Context(), id, lr, nil)
			if r.Context().Err() != nil {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "cmpl-" + strconv.FormatInt(id, 10), "object": objectName(api, false),
				"model": s.profile.Model, "choices": []any{choice(api, repeatWords(output), &finish, false)}, "usage": usage})
			return
		}
		fl, _ := w.(http.Flusher)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		write := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			if fl != nil {
				fl.Flush()
			}
		}
		base := map[string]any{"id": "cmpl-" + strconv.FormatInt(id, 10), "object": objectName(api, true), "model": s.profile.Model}
		chunk := func(c map[string]any) map[string]any {
			m := map[string]any{}
			for k, v := range base {
				m[k] = v
			}
			for k, v := range c {
				m[k] = v
			}
			return m
		}
		if api == "chat" {
			write(chunk(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}}}))
		}
		// Token chunks are the hot path of a time-scaled simulator: their
		// JSON is spliced around the text rather than marshalled whole.
		field := "text"
		if api == "chat" {
			field = "delta"
		}
		head, _ := json.Marshal(base)
		prefix := append([]byte("data: "), head[:len(head)-1]...)
		prefix = append(prefix, `,"choices":[{"index":0,"finish_reason":null,"`+field+`":`...)
		if api == "chat" {
			prefix = append(prefix, `{"content":`...)
		}
		suffix := "}]}\n\n"
		if api == "chat" {
			suffix = "}" + suffix
		}
		n := 0
		var buf []byte
		s.wait(r.Context(), id, lr, func(tokens int) {
			var text []byte
			for range tokens {
				text = append(text, words[n%len(words)]...)
				n++
			}
			q, _ := json.Marshal(string(text))
			buf = append(append(append(buf[:0], prefix...), q...), suffix...)
			_, _ = w.Write(buf)
			if fl != nil {
				fl.Flush()
			}
		})
		if r.Context().Err() != nil {
			return
		}
		write(chunk(map[string]any{"choices": []any{choice(api, "", &finish, true)}}))
		if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
			write(chunk(map[string]any{"choices": []any{}, "usage": usage}))
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		if fl != nil {
			fl.Flush()
		}
	}
}

// wait delivers a request's tokens until it finishes or the client leaves.
// Tokens already waiting are delivered together, as one chunk, the way vLLM
// merges the tokens of several steps when its client falls behind: a
// time-scaled simulator would otherwise owe one write per token per step.
func (s *Server) wait(ctx context.Context, id int64, lr *liveReq, each func(tokens int)) (finished bool) {
	for {
		var ev event
		select {
		case <-ctx.Done():
			s.cancel(id)
			return false
		case ev = <-lr.events:
		}
		tokens := 0
		deliver := func() {
			if tokens > 0 && each != nil {
				each(tokens)
			}
		}
		for more := true; more; {
			switch ev.kind {
			case FirstToken, Token:
				tokens++
			case Finished:
				deliver()
				return true
			}
			select {
			case ev = <-lr.events:
			default:
				more = false
			}
		}
		deliver()
	}
}

func objectName(api string, stream bool) string {
	switch {
	case api == "chat" && stream:
		return "chat.completion.chunk"
	case api == "chat":
		return "chat.completion"
	}
	return "text_completion"
}

func choice(api, content string, finish *string, stream bool) map[string]any {
	c := map[string]any{"index": 0, "finish_reason": finish}
	switch {
	case api == "completions":
		c["text"] = content
	case stream:
		c["delta"] = map[string]any{"content": content}
	default:
		c["message"] = map[string]any{"role": "assistant", "content": content}
	}
	return c
}

func repeatWords(n int) string {
	out := make([]byte, 0, n*6)
	for i := range n {
		out = append(out, words[i%len(words)]...)
	}
	return string(out)
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.profile.Model, "object": "model", "owned_by": "headroom-sim", "max_model_len": s.profile.Params.KVCapacity}}})
}

// tokenize answers in vLLM's shape: prompt or messages in, count and tokens out.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var q completionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&q); err != nil {
		vllmError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	api := "completions"
	if len(q.Messages) > 0 {
		api = "chat"
	}
	n, ok := q.promptTokens(api)
	if !ok {
		vllmError(w, http.StatusBadRequest, "prompt or messages required")
		return
	}
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = i % 50000
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"count": n, "max_model_len": s.profile.Params.KVCapacity, "tokens": tokens})
}
