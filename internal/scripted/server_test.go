package scripted

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/probe"
)

// serveLaw serves a law on an in-memory network inside the bubble until
// the test ends, and returns a client endpoint for it.
func serveLaw(t *testing.T, l Law, prod *Production) (probe.Endpoint, *Server) {
	ctx, cancel := context.WithCancel(t.Context())
	srv := NewServer(l, prod)
	ln, stop := memnet.Serve(srv)
	var wg sync.WaitGroup
	wg.Go(func() { srv.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		stop()
		wg.Wait()
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = ln.Dial
	return probe.Endpoint{BaseURL: "http://law", Client: &http.Client{Transport: tr}}, srv
}

// A probe of a law with a closed form gets the times of the form, over
// HTTP in virtual time, and /metrics says what the server holds.
func TestServerStreamsTheLaw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Law{Family: "linear", Overhead: 0.2, PrefillPerToken: 1e-4, TTFTPerOther: 0.3, ITLBase: 0.01, ITLSlope: 0.002, ITLPower: 1, ITLAtArrival: true}
		ep, _ := serveLaw(t, l, nil)
		var wg sync.WaitGroup
		results := make([]probe.Result, 3)
		for i := range results {
			wg.Go(func() {
				results[i] = probe.Run(t.Context(), ep, probe.Request{API: "chat", Prompt: "a b c d e f g h i j", MaxTokens: 20})
			})
		}
		wg.Wait()
		// Three together: each meets two others. TTFT 0.2 + 10 x 0.1 ms +
		// 2 x 0.3 s; ITL 10 + 2 x 2 ms.
		for _, r := range results {
			if r.Outcome != probe.Success || r.PromptTokens != 10 || r.CompletionTokens != 20 {
				t.Fatalf("outcome %s (%v), %d prompt and %d completion tokens", r.Outcome, r.Err, r.PromptTokens, r.CompletionTokens)
			}
			if d := r.TTFT - 801*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("TTFT %s, want 801 ms", r.TTFT)
			}
			if d := r.Decode - 19*14*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("decode %s, want 19 x 14 ms", r.Decode)
			}
		}
	})
}

// Under production load the server's /metrics count the requests in
// flight and the tokens, in vLLM's names, as headroom's engine reader
// parses them; a restart sets the counters back.
func TestServerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Families()[2].Draw(1) // kv-cliff: every metric
		l.RestartAt, l.Downtime = 600, 30
		ep, _ := serveLaw(t, l, &Production{Low: 4, High: 4, Period: 3600, Think: 1})
		read := func() engine.Load {
			resp, err := ep.Client.Get(ep.BaseURL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			g, err := engine.Parse(resp.Body, "auto")
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		time.Sleep(590 * time.Second)
		before := read()
		if before.Engine != "vllm" || before.Running+before.Waiting < 1 || before.PromptTokens <= 0 || before.GenerationTokens <= 0 || !(before.ITLCount > 0) || !(before.KVUsage > 0) {
			t.Errorf("before the restart: %+v", before)
		}
		time.Sleep(60 * time.Second)
		after := read()
		if !(after.GenerationTokens < before.GenerationTokens) {
			t.Errorf("generation tokens %g after the restart, %g before", after.GenerationTokens, before.GenerationTokens)
		}
		t.Logf("before %+v\nafter %+v", before, after)
	})
}

// A restart fails the requests in flight, answers nothing while the
// server is down, and serves the same law after.
func TestServerRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Families()[3].Draw(1) // chunked-prefill: the stepped engine
		l.RestartAt, l.Downtime = 100, 30
		ep, _ := serveLaw(t, l, nil)
		q := probe.Request{API: "completions", Prompt: "a b c d e f g h", MaxTokens: 100000}
		time.Sleep(90 * time.Second)
		if r := probe.Run(t.Context(), ep, q); r.Outcome != probe.StreamError {
			t.Errorf("a request in flight at the restart: %s (%v), want %s", r.Outcome, r.Err, probe.StreamError)
		}
		q.MaxTokens = 10
		if r := probe.Run(t.Context(), ep, q); r.Outcome != probe.HTTPError {
			t.Errorf("a request while down: %s (%v), want %s", r.Outcome, r.Err, probe.HTTPError)
		}
		time.Sleep(30 * time.Second)
		if r := probe.Run(t.Context(), ep, q); r.Outcome != probe.Success {
			t.Errorf("a request after the restart: %s (%v)", r.Outcome, r.Err)
		}
	})
}
