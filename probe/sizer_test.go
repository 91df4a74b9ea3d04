package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/scripted"
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

func TestTokenCount(t *testing.T) {
	tests := []struct {
		body string
		want int
		err  bool
	}{
		{`{"count": 5, "max_model_len": 10, "tokens": [1,2,3,4,5]}`, 5, false},                        // vLLM
		{`{"tokens": [1,2,3], "count": 3}`, 3, false},                                                 // SGLang
		{`{"tokens": [1,2]}`, 2, false},                                                               // llama.cpp
		{`[{"id":1,"text":"a","start":0,"stop":1},{"id":2,"text":"b","start":1,"stop":2}]`, 2, false}, // TGI
		{`[{"id":1,"text":"],[\"}{,","special":false}]` + "\n", 1, false},                             // brackets and quotes in a token's text
		{` {"tokens": [], "count": null} `, 0, false},
		{`{"tokens": [[1,2],[3]], "x": {"y": [1, "]"]}}`, 2, false},
		{`{"detail": "Not Found"}`, 0, true},
		{`{"tokens": null}`, 0, true},
		{`{"count": 2.5}`, 0, true},
		{`{"count": -1}`, 0, true},
		{`{"tokens": [1,2,3`, 0, true}, // cut short
		{`{"tokens": [1,2]} [3]`, 0, true},
		{`<html>`, 0, true},
		{``, 0, true},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), 0, true},
	}
	for _, tc := range tests {
		got, err := tokenCount(strings.NewReader(tc.body))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("tokenCount(%s) = %d, %v; want %d, error %v", tc.body, got, err, tc.want, tc.err)
		}
	}
}

// decodedCount is what decoding the whole answer says: the oracle
// tokenCount must agree with wherever it decodes.
func decodedCount(raw []byte) (int, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return 0, false
		}
		return len(arr), true
	}
	var obj struct {
		Count  *int              `json:"count"`
		Tokens []json.RawMessage `json:"tokens"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return 0, false
	}
	switch {
	case obj.Count != nil && *obj.Count >= 0:
		return *obj.Count, true
	case obj.Count == nil && obj.Tokens != nil:
		return len(obj.Tokens), true
	}
	return 0, false
}

// FuzzTokenCount: wherever a whole decode of a valid answer gives a count,
// scanning gives the same, and any input ends in a count or an error. An
// answer with escapes (\u0063ount for count) is left out of the
// comparison: tokenCount reads an escaped key as none it looks for, and no
// tokenizer escapes its keys.
func FuzzTokenCount(f *testing.F) {
	for _, s := range []string{`{"count": 5, "tokens": [1,2,3,4,5]}`, `{"tokens": [1,2]}`, `[{"id":1,"text":"a"}]`, `{"tokens": ["\"]", {"a": [1]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := tokenCount(bytes.NewReader(raw))
		want, ok := decodedCount(raw)
		if ok && json.Valid(raw) && !bytes.Contains(raw, []byte(`\`)) && (err != nil || got != want) {
			t.Errorf("tokenCount(%q) = %d, %v; decoding says %d", raw, got, err, want)
		}
		if err == nil && got < 0 {
			t.Errorf("tokenCount(%q) = %d", raw, got)
		}
	})
}

// BenchmarkTokenCount reads the answer to a 96K-token prompt
// (go test ./probe -run '^$' -bench TokenCount -benchmem).
func BenchmarkTokenCount(b *testing.B) {
	var page bytes.Buffer
	page.WriteString(`{"count": 98304, "max_model_len": 131072, "tokens": [`)
	for i := range 98304 {
		if i > 0 {
			page.WriteByte(',')
		}
		fmt.Fprint(&page, 1000+i%30000)
	}
	page.WriteString("]}")
	b.SetBytes(int64(page.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if n, err := tokenCount(bytes.NewReader(page.Bytes())); err != nil || n != 98304 {
			b.Fatal(n, err)
		}
	}
}

// Against a llama.cpp-shaped server (its /tokenize counts content without
// the chat template and answers a chat body with no tokens; long prompts
// are refused), with engine auto, every probe is within 1%, the first too.
func TestPromptSizingLlamaCpp(t *testing.T) {
	for _, api := range []string{"chat", "completions"} {
		for _, target := range []int{512, 1024, 8192, 32768} {
			t.Run(fmt.Sprintf("%s/%d", api, target), func(t *testing.T) {
				s := sim.NewServer(sim.Tiny, 1000, "vllm")
				go s.Run(t.Context())
				srv := httptest.NewServer(scripted.LlamaCpp(s.Handler(), 40000))
				defer srv.Close()
				p := NewProber(Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, api, "", "auto")
				for i := range 4 {
					r := p.Probe(t.Context(), Scenario{Name: "s", InputTokens: target, OutputTokens: 4, Cold: true, Timeout: 10 * time.Second})
					if r.Outcome != Success || !within(r.PromptTokens, target, Tolerance) {
						t.Fatalf("probe %d: %s, %d prompt tokens (%v); want success at %d ± 1%%", i, r.Outcome, r.PromptTokens, r.Err, target)
					}
				}
			})
		}
	}
}

// A server whose usage.prompt_tokens stays far below the truth cannot grow
// the prompt without bound, and none of its probes is a success.
func TestPromptSizingUnderReported(t *testing.T) {
	var mu sync.Mutex
	longest := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var q struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&q)
		mu.Lock()
		longest = max(longest, len(strings.Fields(q.Messages[0].Content)))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for range 4 {
			fmt.Fprintf(w, "data: %s\n\n", chat("x"))
		}
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", stopChunk, usage(100, 4))
	}))
	defer srv.Close()
	p := NewProber(Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, "chat", "m", "auto")
	const target = 256
	for i := range 20 {
		r := p.Probe(t.Context(), Scenario{Name: "s", InputTokens: target, OutputTokens: 4, Timeout: 5 * time.Second})
		if r.Outcome != PromptMismatch {
			t.Fatalf("probe %d: %s (%v), want prompt_mismatch", i, r.Outcome, r.Err)
		}
	}
	if limit := int(1.25*target/minRatio) + 8; longest > limit {
		t.Errorf("prompt grew to %d words, over the bound of %d", longest, limit)
	}
}

// A server that refuses non-streaming requests still gets sized: the short
// calibration counts stream as probes do, and no probe outside 1% is a success.
func TestPromptSizingStreamingOnly(t *testing.T) {
	s := sim.NewServer(sim.Tiny, 1000, "vllm")
	go s.Run(t.Context())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/tokenize" || bytes.Contains(body, []byte(`"stream":false`)) {
			http.Error(w, `{"error":"only streaming"}`, http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	p := NewProber(Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, "chat", "", "auto")
	sc := Scenario{Name: "s", InputTokens: 8192, OutputTokens: 4, Cold: true, Timeout: 10 * time.Second}
	for i := range 3 {
		r := p.Probe(t.Context(), sc)
		if r.Outcome == Success && !within(r.PromptTokens, sc.InputTokens, Tolerance) {
			t.Fatalf("probe %d: success at %d prompt tokens, want %d ± 1%%", i, r.PromptTokens, sc.InputTokens)
		}
		if i > 0 && r.Outcome != Success {
			t.Fatalf("probe %d: %s (%v)", i, r.Outcome, r.Err)
		}
	}
}

// Without a usage chunk, the server's tokenizer counts the streamed text,
// when it counts text alone: two tokens a chunk are 16 tokens, not 8 chunks.
func TestOutputCountedByTokenizerWithoutUsage(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"data":[{"id":"m"}]}`) })
	mux.HandleFunc("POST /tokenize", func(w http.ResponseWriter, r *http.Request) { // vLLM's shape, words as tokens
		var q struct{ Prompt string }
		_ = json.NewDecoder(r.Body).Decode(&q)
		fmt.Fprintf(w, `{"count":%d}`, len(strings.Fields(q.Prompt)))
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, _ *http.Request) {
		for range 8 {
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"tok tok \",\"finish_reason\":null}]}\n\n")
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p := NewProber(Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, "completions", "", "vllm")
	r := p.Probe(t.Context(), Scenario{Name: "s", InputTokens: 256, OutputTokens: 16, Timeout: 5 * time.Second})
	if r.Outcome != Success || r.CompletionTokens != 16 || r.Chunks != 8 {
		t.Fatalf("outcome %s (%v), %d tokens in %d chunks; want success, 16 tokens in 8", r.Outcome, r.Err, r.CompletionTokens, r.Chunks)
	}
}

// Probers of one Shared serving one model size a prompt once: the second
// target's first probe is right with no calibration of its own (only the
// tokenizer's detection), and each corrects its own copy of the fit.
func TestFitShared(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shared := NewShared()
	sc := Scenario{Name: "s", InputTokens: 8192, OutputTokens: 4, Cold: true, Timeout: 10 * time.Second}
	target := func(h http.Handler) (*Prober, *atomic.Int32) {
		t.Helper()
		var tokenizes atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/tokenize" {
				tokenizes.Add(1)
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return NewProber(Endpoint{BaseURL: srv.URL, Client: NewClient(false)}, "chat", "", "vllm", WithShared(shared)), &tokenizes
	}
	s := sim.NewServer(sim.Tiny, 1000, "vllm")
	go s.Run(ctx)
	a, aCalls := target(s.Handler())
	b, bCalls := target(s.Handler())
	for i, p := range []*Prober{a, b} {
		if r := p.Probe(ctx, sc); r.Outcome != Success || !within(r.PromptTokens, sc.InputTokens, Tolerance) {
			t.Fatalf("target %d: %s, %d prompt tokens (%v)", i, r.Outcome, r.PromptTokens, r.Err)
		}
	}
	// DetectCounter counts twice (8 and 64 words); a calibration at least twice more.
	if n := aCalls.Load(); n < 4 {
		t.Errorf("the first target's sizing made %d tokenize calls, want a calibration's", n)
	}
	if n := bCalls.Load(); n != 2 {
		t.Errorf("the second target's sizing made %d tokenize calls, want only the detection's 2", n)
	}

	// Each holds its own copy: what b's server's counts teach b's sizing
	// (Observe) changes neither a's nor the shared fit.
	sa, sb := a.sizers["s/8192"], b.sizers["s/8192"]
	if sa == nil || sb == nil || sa == sb {
		t.Fatalf("sizers %p and %p, want two", sa, sb)
	}
	before := *sa
	sb.Observe(sb.Words(), sc.InputTokens*11/10)
	fk := fitKey{model: a.model, api: "chat", engine: "vllm", tokenizer: "vllm", input: sc.InputTokens}
	if f, ok := shared.fit(fk); !ok || f.Words() != before.Words() || *sa != before || sb.Words() == before.Words() {
		t.Errorf("after b's correction: shared %v (%v), a's %v, b's %v; a's and the shared fit were %v", f, ok, *sa, *sb, before)
	}
}
