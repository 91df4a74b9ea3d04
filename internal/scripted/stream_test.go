package scripted

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/probe"
)

// A probe of the scripted stream times its tokens no earlier than the server
// began to write them, and /stats reports the server's own first flush.
//
// The probe's TTFT is not held to 50 ms: it starts when the client's writer
// goroutine has written the request, and the server's handler may begin
// before that goroutine runs again (CI once measured 48.8 ms against a
// first flush 50.6 ms after the handler began). The instants, on one
// monotonic clock, are what causality orders.
func TestStream(t *testing.T) {
	s := &Stream{TTFT: 50 * time.Millisecond, ITL: 5 * time.Millisecond}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ep := probe.Endpoint{BaseURL: srv.URL, Client: probe.NewClient(false)}
	before := time.Now()
	r := probe.Run(t.Context(), ep, probe.Request{API: "chat", Model: "scripted", Prompt: "a b c d", MaxTokens: 20})
	if r.Outcome != probe.Success || r.CompletionTokens != 20 || r.PromptTokens != 4 {
		t.Fatalf("outcome %s (%v), %d completion and %d prompt tokens; want success, 20 and 4", r.Outcome, r.Err, r.CompletionTokens, r.PromptTokens)
	}
	flushed := s.Flushed()
	if len(flushed) != 1 {
		t.Fatalf("server streamed %d requests; want 1", len(flushed))
	}
	f := flushed[0]
	if f.Arrived.Before(before) || f.First.Sub(f.Arrived) < s.TTFT || f.Last.Sub(f.First) < 19*s.ITL {
		t.Errorf("server: handler %s after the probe began, first flush %s after it, last %s after the first; want >= 0, >= 50 ms and >= 19 x 5 ms",
			f.Arrived.Sub(before), f.First.Sub(f.Arrived), f.Last.Sub(f.First))
	}
	first, last := r.Start.Add(r.TTFT), r.Start.Add(r.E2E)
	if first.Before(f.First) || last.Before(f.Last) || r.Decode != r.E2E-r.TTFT {
		t.Errorf("probe: first token %s and last %s after the server began to write them, decode %s of E2E %s - TTFT %s; want both >= 0 and decode = E2E - TTFT",
			first.Sub(f.First), last.Sub(f.Last), r.Decode, r.E2E, r.TTFT)
	}

	resp, err := http.Post(srv.URL+"/stats", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats map[string]float64
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	want := float64(f.First.Sub(f.Arrived).Microseconds()) / 1000
	if stats["requests"] != 1 || math.Abs(stats["first_flush_mean_ms"]-want) > 1e-9 || stats["first_flush_p99_ms"] != stats["first_flush_mean_ms"] {
		t.Errorf("stats %v; want one request, its first flush at %.3f ms as mean and p99", stats, want)
	}
	if len(s.Flushed()) != 0 {
		t.Errorf("a POST to /stats left %d requests; want them reset", len(s.Flushed()))
	}
}
