package scripted

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/probe"
)

// A probe of the scripted stream gets its tokens at the scripted times, and
// /stats reports the first flush the probe's TTFT is set against.
func TestStream(t *testing.T) {
	srv := httptest.NewServer(&Stream{TTFT: 50 * time.Millisecond, ITL: 5 * time.Millisecond})
	defer srv.Close()
	ep := probe.Endpoint{BaseURL: srv.URL, Client: probe.NewClient(false)}
	r := probe.Run(t.Context(), ep, probe.Request{API: "chat", Model: "scripted", Prompt: "a b c d", MaxTokens: 20})
	if r.Outcome != probe.Success || r.CompletionTokens != 20 || r.PromptTokens != 4 {
		t.Fatalf("outcome %s (%v), %d completion and %d prompt tokens; want success, 20 and 4", r.Outcome, r.Err, r.CompletionTokens, r.PromptTokens)
	}
	if r.TTFT < 50*time.Millisecond || r.Decode < 19*5*time.Millisecond {
		t.Errorf("TTFT %s, decode %s: faster than scripted (50 ms, 19 x 5 ms)", r.TTFT, r.Decode)
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
	if stats["requests"] != 1 || stats["first_flush_mean_ms"] < 50 || stats["first_flush_mean_ms"] > float64(r.TTFT.Milliseconds())+1 {
		t.Errorf("stats %v; want one request, first flush from 50 ms to the probe's TTFT (%s)", stats, r.TTFT)
	}
}
