package probe

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// sseBody is a whole stream of n one-token chunks plus usage, as vLLM sends it.
func sseBody(n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "data: %s\n\n", roleChunk)
	for range n {
		fmt.Fprintf(&b, "data: %s\n\n", chat("token"))
	}
	fmt.Fprintf(&b, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", stopChunk, usage(1024, n))
	return b.Bytes()
}

// BenchmarkReadStream is the parsing cost of one streamed chunk.
func BenchmarkReadStream(b *testing.B) {
	body := sseBody(1024)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := readStream(context.Background(), Endpoint{}, bytes.NewReader(body), Result{}, 1024)
		if r.Outcome != Success {
			b.Fatal(r.Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1024, "ns/chunk")
}

// BenchmarkRun is one whole 1024-token probe over loopback HTTP, server included.
func BenchmarkRun(b *testing.B) {
	body := sseBody(1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	ep := Endpoint{BaseURL: srv.URL, Client: NewClient(false)}
	q := Request{API: "chat", Model: "m", Prompt: PromptText("", 1000), MaxTokens: 1024}
	b.ReportAllocs()
	for b.Loop() {
		if r := Run(context.Background(), ep, q); r.Outcome != Success {
			b.Fatal(r.Err)
		}
	}
}
