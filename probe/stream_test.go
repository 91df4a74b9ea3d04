package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/memnet"
)

// step is one scripted write: at offset after the request arrived, send data
// as an SSE event (or, for raw steps, as is).
type step struct {
	at   time.Duration
	data string
	raw  bool
}

// sent records when a scripted server actually wrote each step, measured from
// the request's arrival: the truth a probe's timings are compared with, so a
// late wake-up of the server's own sleep is not blamed on the probe.
type sent struct {
	mu sync.Mutex
	at []time.Duration
}

func (s *sent) get() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.at...)
}

// script serves SSE steps at absolute offsets, so sleep errors do not add up.
func script(status int, steps ...step) http.HandlerFunc {
	return recorded(&sent{}, status, steps...)
}

func recorded(rec *sent, status int, steps ...step) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if status != http.StatusOK {
			http.Error(w, `{"object":"error","message":"scripted failure"}`, status)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, s := range steps {
			select {
			case <-time.After(time.Until(start.Add(s.at))):
			case <-r.Context().Done():
				return
			}
			if s.raw {
				fmt.Fprint(w, s.data)
			} else {
				fmt.Fprintf(w, "data: %s\n\n", s.data)
			}
			fl.Flush()
			rec.mu.Lock()
			rec.at = append(rec.at, time.Since(start))
			rec.mu.Unlock()
		}
	}
}

func chat(content string) string {
	return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`, content)
}

const (
	roleChunk = `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	stopChunk = `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`
)

func usage(prompt, completion int) string {
	return fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`, prompt, completion)
}

// tokens scripts n content chunks, perChunk tokens each, the first at ttft and
// then every gap.
func tokens(ttft, gap time.Duration, chunks, perChunk int) []step {
	out := []step{{at: 0, data: roleChunk}}
	for i := range chunks {
		out = append(out, step{at: ttft + time.Duration(i)*gap, data: chat(strings.Repeat("tok ", perChunk))})
	}
	return out
}

func then(s []step, more ...step) []step { return append(s, more...) }

func end(at time.Duration, withUsage bool, prompt, completion int) []step {
	s := []step{{at: at, data: stopChunk}}
	if withUsage {
		s = append(s, step{at: at, data: usage(prompt, completion)})
	}
	return append(s, step{at: at, data: "[DONE]"})
}

func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	tol := max(2*time.Millisecond, want/100)
	if d := got - want; d < -tol || d > tol {
		t.Errorf("%s = %s, want %s ± %s", what, got, want, tol)
	}
}

func TestRunTimings(t *testing.T) {
	const ttft, gap = 300 * time.Millisecond, 20 * time.Millisecond
	tests := []struct {
		name      string
		steps     []step
		chunks    int
		tokens    int
		fromUsage bool
		maxGap    time.Duration
		// steady: the typical step's ITL, the stall left out, chunks of
		// several tokens counted as ITL counts them.
		steady time.Duration
	}{
		{"one token per chunk", then(tokens(ttft, gap, 20, 1), end(ttft+19*gap, true, 1024, 20)...), 20, 20, true, gap, gap},
		{"four tokens per chunk", then(tokens(ttft, 4*gap, 5, 4), end(ttft+16*gap, true, 1024, 20)...), 5, 20, true, 4 * gap, 16 * gap / 19},
		{"no usage chunk counts chunks", then(tokens(ttft, gap, 20, 1), end(ttft+19*gap, false, 0, 0)...), 20, 20, false, gap, gap},
		{"stall mid-stream", then(append(tokens(ttft, gap, 10, 1), tokens(ttft+9*gap+400*time.Millisecond, gap, 10, 1)[1:]...),
			end(ttft+18*gap+400*time.Millisecond, true, 1024, 20)...), 20, 20, true, 400 * time.Millisecond, gap},
	}
	for _, tc := range tests {
		// In a synctest bubble over an in-memory network, on the shipped
		// client: the script writes at its exact virtual offsets and the
		// probe reads at the same instants, so the timings are compared with
		// no scheduler's noise (on a loaded CI machine it was ±2 ms).
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &sent{}
				ln, stop := memnet.Serve(recorded(rec, http.StatusOK, tc.steps...))
				client := NewClient(false)
				client.Transport.(*http.Transport).DialContext = ln.Dial
				defer func() {
					client.CloseIdleConnections()
					stop()
				}()
				r := Run(context.Background(), Endpoint{BaseURL: "http://scripted", Client: client}, Request{API: "chat", Model: "m", Prompt: "hi", MaxTokens: 20})
				if r.Outcome != Success {
					t.Fatalf("outcome %s (%v), want success", r.Outcome, r.Err)
				}
				// Steps: a role chunk, the content chunks, then stop (+usage) and [DONE].
				at := rec.get()
				first, last := at[1], at[tc.chunks]
				gap := time.Duration(0)
				for i := 2; i <= tc.chunks; i++ {
					gap = max(gap, at[i]-at[i-1])
				}
				// The script itself must have run near its plan for the test to mean anything.
				nearLoose(t, "scripted TTFT", first, ttft)
				nearLoose(t, "scripted max gap", gap, tc.maxGap)
				near(t, "TTFT", r.TTFT, first)
				near(t, "E2E", r.E2E, last)
				near(t, "decode time", r.Decode, last-first)
				near(t, "max gap", r.MaxGap, gap)
				near(t, "steady ITL", r.SteadyITL(), tc.steady)
				lastAt := last
				if r.Chunks != tc.chunks || r.CompletionTokens != tc.tokens || r.TokensFromUsage != tc.fromUsage {
					t.Errorf("chunks %d tokens %d fromUsage %v, want %d %d %v", r.Chunks, r.CompletionTokens, r.TokensFromUsage, tc.chunks, tc.tokens, tc.fromUsage)
				}
				wantITL := r.Decode / time.Duration(tc.tokens-1)
				if r.ITL() != wantITL {
					t.Errorf("ITL %s, want decode/(tokens-1) = %s", r.ITL(), wantITL)
				}
				if got, want := r.DecodeTPS(), float64(tc.tokens-1)/(lastAt-first).Seconds(); math.Abs(got-want) > 0.02*want {
					t.Errorf("decode speed %.1f tok/s, want %.1f", got, want)
				}
				if tc.fromUsage && math.Abs(r.PrefillTPS()-1024/r.TTFT.Seconds()) > 1e-9 {
					t.Errorf("prefill speed %.1f, want prompt tokens / TTFT", r.PrefillTPS())
				}
			})
		})
	}
}

// Each failure a probe meets gets its outcome, in a synctest bubble over an
// in-memory network: a stall past a 200 ms deadline is a stall in virtual
// time, where on the wall clock of a loaded machine the deadline once passed
// before the server's headers came (an HTTP status of 0, not 200).
func TestRunFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: nothing listens, the connection is refused
		timeout time.Duration
		want    Outcome
		status  int
	}{
		{"HTTP 429", script(http.StatusTooManyRequests), 0, HTTPError, 429},
		{"HTTP 500", script(http.StatusInternalServerError), 0, HTTPError, 500},
		{"refused connection", nil, 0, ConnectError, 0},
		{"error mid-stream", script(200, then(tokens(10*time.Millisecond, time.Millisecond, 3, 1),
			step{at: 20 * time.Millisecond, data: `{"error":{"message":"CUDA out of memory","code":500}}`})...), 0, StreamError, 200},
		{"garbled chunk", script(200, then(tokens(10*time.Millisecond, time.Millisecond, 3, 1), step{at: 20 * time.Millisecond, data: `{"choices":[`})...), 0, StreamError, 200},
		{"connection cut", script(200, tokens(10*time.Millisecond, time.Millisecond, 3, 1)...), 0, StreamError, 200},
		{"server ignores min_tokens", script(200, then(tokens(10*time.Millisecond, time.Millisecond, 10, 1), end(20*time.Millisecond, true, 1024, 10)...)...), 0, ShortOutput, 200},
		{"stall past the timeout", script(200, then(tokens(10*time.Millisecond, time.Millisecond, 3, 1), step{at: 5 * time.Second, data: "[DONE]"})...), 200 * time.Millisecond, Timeout, 200},
		{"no content at all", script(200, then([]step{{at: 0, data: roleChunk}}, end(10*time.Millisecond, true, 1024, 0)...)...), 0, StreamError, 200},
		{"401 echoing the key", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"invalid key in header Authorization: `+r.Header.Get("Authorization")+`"}`, http.StatusUnauthorized)
		}, 0, HTTPError, 401},
		{"usage above what streamed", script(200, then([]step{{at: 10 * time.Millisecond, data: chat("ab")}}, end(20*time.Millisecond, true, 1024, 20)...)...), 0, UsageMismatch, 200},
		{"usage above max_tokens", script(200, then(tokens(10*time.Millisecond, time.Millisecond, 20, 1), end(40*time.Millisecond, true, 1024, 200)...)...), 0, UsageMismatch, 200},
		{"more chunks than tokens", script(200, then(tokens(10*time.Millisecond, time.Millisecond, 15, 1), end(30*time.Millisecond, true, 1024, 10)...)...), 0, UsageMismatch, 200},
		{"more chunks than max_tokens", script(200, then(tokens(10*time.Millisecond, time.Millisecond, 200, 1), end(250*time.Millisecond, false, 0, 0)...)...), 0, UsageMismatch, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ln := memnet.Listen()
				if tc.handler == nil {
					ln.Close()
				} else {
					var stop func()
					ln, stop = memnet.Serve(tc.handler)
					defer stop()
				}
				client := NewClient(false)
				client.Transport.(*http.Transport).DialContext = ln.Dial
				defer client.CloseIdleConnections()
				ctx := context.Background()
				if tc.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				r := Run(ctx, Endpoint{BaseURL: "http://scripted", APIKey: "sk-secret-value", Client: client}, Request{API: "chat", Model: "m", Prompt: "hi", MaxTokens: 20})
				if r.Outcome != tc.want || r.Status != tc.status {
					t.Fatalf("outcome %s status %d (%v), want %s %d", r.Outcome, r.Status, r.Err, tc.want, tc.status)
				}
				if r.Err == nil {
					t.Fatal("a failed probe must carry its error")
				}
				if strings.Contains(r.Err.Error(), "sk-secret-value") {
					t.Fatalf("error leaks the API key: %v", r.Err)
				}
				// A stream its deadline cut keeps how far it came: a burst's
				// probe cut so still has its place by its first token.
				if tc.want == Timeout && !(r.TTFT > 0 && r.E2E >= r.TTFT) {
					t.Errorf("a stream cut after its first tokens kept TTFT %v, E2E %v", r.TTFT, r.E2E)
				}
			})
		})
	}
}

// The SSE specification joins an event's data: lines with newlines; a
// server may split a chunk's JSON across them.
func TestRunMultiLineEvents(t *testing.T) {
	var steps []step
	for i := range 20 {
		steps = append(steps, step{at: time.Duration(i) * time.Millisecond, raw: true,
			data: "event: message\ndata: {\"choices\":[{\"index\":0,\ndata:\"delta\":{\"content\":\"t\"}}]}\n: a comment\n\n"})
	}
	steps = append(steps, end(25*time.Millisecond, true, 1024, 20)...)
	srv := httptest.NewServer(script(200, steps...))
	defer srv.Close()
	r := Run(t.Context(), Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, Request{API: "chat", Model: "m", Prompt: "hi", MaxTokens: 20})
	if r.Outcome != Success || r.Chunks != 20 || r.CompletionTokens != 20 {
		t.Fatalf("outcome %s (%v), %d chunks, %d tokens; want success, 20, 20", r.Outcome, r.Err, r.Chunks, r.CompletionTokens)
	}
}

func TestRunCanceled(t *testing.T) {
	srv := httptest.NewServer(script(200, then(tokens(10*time.Millisecond, time.Millisecond, 3, 1), step{at: 5 * time.Second, data: "[DONE]"})...))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	r := Run(ctx, Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, Request{API: "completions", Model: "m", Prompt: "hi", MaxTokens: 20})
	if r.Outcome != Canceled {
		t.Fatalf("outcome %s, want canceled", r.Outcome)
	}
}

func TestRequestBody(t *testing.T) {
	b, err := Request{API: "completions", Model: "m", Prompt: "p", MaxTokens: 7, Extra: map[string]any{"cache_salt": "x"}}.Body(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"max_tokens":7`, `"min_tokens":7`, `"ignore_eos":true`, `"include_usage":true`, `"prompt":"p"`, `"cache_salt":"x"`, `"stream":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("body %s lacks %s", b, want)
		}
	}
}

// nearLoose checks that the scripted server kept roughly to its plan; its own
// sleeps may overshoot on a loaded machine, which the probe must then measure.
func nearLoose(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if d := got - want; d < -2*time.Millisecond || d > 50*time.Millisecond+want/10 {
		t.Errorf("%s = %s, planned %s", what, got, want)
	}
}

// FuzzReadStream: whatever a server streams, the reader returns a result,
// and a success never has more chunks or tokens than the request allows.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("data: " + chat("a") + "\n\ndata: " + chat("b") + "\n\ndata: " + usage(10, 2) + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\ndata: \"text\":\"a\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": comment\nevent: x\ndata\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"))
	f.Add([]byte("data: " + stopChunk))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := readStream(t.Context(), Endpoint{}, bytes.NewReader(stream), Result{Start: time.Now()}, 16)
		if r.Outcome == Success && (r.Chunks > 16 || r.CompletionTokens > 16 || r.CompletionTokens < r.Chunks || r.CompletionTokens > len(r.Text)) {
			t.Fatalf("success with %d chunks, %d tokens for max_tokens 16", r.Chunks, r.CompletionTokens)
		}
	})
}

// Credentials from an http_client_config are masked like the API key, even
// echoed bare, with no auth scheme before them.
func TestRunRedactsEndpointSecrets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unknown credential "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), http.StatusUnauthorized)
	}))
	defer srv.Close()
	client := srv.Client()
	client.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		r.Header.Set("Authorization", "Bearer raw-cred-0987")
		return http.DefaultTransport.RoundTrip(r)
	})
	r := Run(t.Context(), Endpoint{BaseURL: srv.URL, Secrets: []string{"raw-cred-0987"}, Client: client}, Request{API: "chat", Model: "m", Prompt: "hi", MaxTokens: 4})
	if r.Outcome != HTTPError || r.Err == nil || strings.Contains(r.Err.Error(), "raw-cred") || !strings.Contains(r.Err.Error(), "<secret>") {
		t.Fatalf("outcome %s, error %v: want http_error with the credential masked", r.Outcome, r.Err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A chunk read by the shape of one the decoder read is read as the decoder
// reads it: the same content, and no finish reason, usage or error.
func FuzzShape(f *testing.F) {
	for _, s := range [][2]string{{chat("token"), chat("other")}, {chat("a"), chat(`b\"c`)}, {chat("a"), stopChunk}, {roleChunk, chat("x")},
		{`{"choices":[{"delta":{"content":"x"}}],"m":{"content":"x"}}`, `{"choices":[{"delta":{"content":"y"}}],"m":{"content":"x"}}`},
		{`{"choices":[{"delta":{"content":"\u0078"}}],"m":{"content":"x"}}`, `{"choices":[{"delta":{"content":"\u0078"}}],"m":{"content":"y"}}`}} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, first, next []byte) {
		var c streamChunk
		if json.Unmarshal(first, &c) != nil {
			return
		}
		s, ok := learn(first, &c)
		if !ok {
			return
		}
		content, ok := s.content(next)
		if !ok {
			return
		}
		var d streamChunk
		if err := json.Unmarshal(next, &d); err != nil {
			t.Fatalf("shape of %q took %q, which does not decode: %v", first, next, err)
		}
		got := ""
		for _, ch := range d.Choices {
			got += ch.Text + ch.Delta.Content + ch.Delta.ReasoningContent + ch.Delta.Reasoning
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				t.Fatalf("shape took %q, which has finish reason %q", next, *ch.FinishReason)
			}
		}
		if got != string(content) || d.Usage != nil || len(d.Error) > 0 && string(d.Error) != "null" || d.Object == "error" {
			t.Fatalf("shape of %q read %q from %q; the decoder reads %q, usage %v, error %s, object %q", first, content, next, got, d.Usage, d.Error, d.Object)
		}
	})
}

type connKey struct{}

// A server that drops a kept-alive connection as the next request arrives
// (llama.cpp closes them after a few requests) costs no probe and no count:
// the request goes again on a fresh connection, whether the drop came
// before any of it was written (the transport resends that itself) or
// while a long prompt was being written (a broken pipe, which it does not).
func TestDroppedKeepAliveIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt string
	}{
		{"before the request", "hi"},
		{"while the prompt was written", strings.Repeat("word ", 4<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := sseBody(4)
			var sentKey atomic.Bool
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, ok := r.Header["Idempotency-Key"]; ok {
					sentKey.Store(true)
				}
				if r.Context().Value(connKey{}).(*atomic.Int32).Add(1) > 1 { // a reused connection: drop it unanswered, unread
					conn, _, err := w.(http.Hijacker).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				if strings.HasSuffix(r.URL.Path, "/tokenize") {
					fmt.Fprint(w, `{"tokens":[1,2,3]}`)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write(body)
			}))
			srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, new(atomic.Int32))
			}
			srv.Start()
			defer srv.Close()
			ep := Endpoint{BaseURL: srv.URL, Client: NewClient(false)}
			q := Request{API: "chat", Model: "m", Prompt: tc.prompt, MaxTokens: 4}
			for i := range 3 {
				if r := Run(t.Context(), ep, q); r.Outcome != Success {
					t.Fatalf("probe %d on a dropped connection: %s (%v)", i+1, r.Outcome, r.Err)
				}
			}
			count, err := json.Marshal(map[string]string{"content": tc.prompt})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				resp, _, err := postJSON(t.Context(), ep, "/tokenize", bytesBody(count))
				if err != nil {
					t.Fatalf("count %d on a dropped connection: %v", i+1, err)
				}
				resp.Body.Close()
			}
			if sentKey.Load() {
				t.Error("the idempotency marker went out as a header")
			}
		})
	}
}

// A server that pads its echo of the key so that the 256-byte cut falls
// inside it gets no part of the key through, in an error answer or in a
// stream's error event, at any padding around the cut.
func TestEchoCutInsideTheKey(t *testing.T) {
	const key = "sk-padded-echo-7c1e9f"
	var pad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo := strings.Repeat("p", int(pad.Load())) + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + " the rest"
		if strings.HasPrefix(r.URL.Path, "/stream/") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"error\":{\"message\":%q}}\n\n", echo)
			return
		}
		http.Error(w, echo, http.StatusInternalServerError)
	}))
	defer srv.Close()
	for _, path := range []string{"", "/stream"} {
		// The stream's error event carries JSON around the echo: its
		// prefix is 24 bytes longer than the plain answer's.
		for p := maxErrorBody - len(key) - 30; p <= maxErrorBody+2; p++ {
			pad.Store(int64(p))
			r := Run(t.Context(), Endpoint{BaseURL: srv.URL + path, APIKey: key, Client: NewClient(false)}, Request{API: "chat", Model: "m", Prompt: "hi", MaxTokens: 4})
			if r.Err == nil {
				t.Fatalf("%q pad %d: no error", path, p)
			}
			for k := 2; k <= len(key); k++ {
				if strings.Contains(r.Err.Error(), key[:k]) {
					t.Fatalf("%q pad %d: %q keeps %q of the key", path, p, r.Err, key[:k])
				}
			}
		}
	}
}
