package sim_test

import (
	"context"
	"math"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/probe"
	"github.com/headroom-dev/headroom/sim"
)

// TestRealTimeMatchesVirtualTime probes the HTTP simulator in real time and
// compares with the engine model's virtual-time prediction for the same request.
func TestRealTimeMatchesVirtualTime(t *testing.T) {
	prof, err := sim.LookupProfile("qwen3-coder-30b-a3b-fp8-h200-vllm")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := sim.NewServer(prof, 1, "vllm")
	go s.Run(ctx)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	p := probe.NewProber(probe.Endpoint{BaseURL: srv.URL, Client: probe.NewClient(false)}, "chat", "", "vllm")
	for _, context := range []int{1024, 8192} {
		sc := probe.Scenario{Name: "s", InputTokens: context, OutputTokens: 64, Cold: true, Timeout: 20 * time.Second}
		var ttfts, decodes []float64
		var prompt int
		for range 3 {
			r := p.Probe(ctx, sc)
			if r.Outcome != probe.Success {
				t.Fatalf("probe: %s %v", r.Outcome, r.Err)
			}
			ttfts = append(ttfts, r.TTFT.Seconds())
			decodes = append(decodes, r.DecodeTPS())
			prompt = r.PromptTokens
		}
		want := sim.Closed(prof.Params, prompt, 64, 1)
		if got := median(ttfts); math.Abs(got/want.TTFT-1) > 0.10 {
			t.Errorf("%d tokens: TTFT %.4fs over HTTP, %.4fs predicted", context, got, want.TTFT)
		}
		if got := median(decodes); math.Abs(got/want.Decode-1) > 0.10 {
			t.Errorf("%d tokens: decode %.1f tok/s over HTTP, %.1f predicted", context, got, want.Decode)
		}
	}
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}
