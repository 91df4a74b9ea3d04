package sim_test

import (
	"math"
	"net/http"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/probe"
	"github.com/headroom-dev/headroom/sim"
)

// TestServerMatchesEngineModel probes the HTTP simulator, which steps its
// engine against the clock, and compares with the engine model's prediction
// for the same request. It runs in a synctest bubble over memnet: the clock
// is virtual, so the server's pacing is checked and not the machine's speed
// (on the wall clock a CI machine busy with -race read 0.31 s of TTFT
// against 0.08 s predicted), to the nanoseconds its timers round to.
func TestServerMatchesEngineModel(t *testing.T) {
	prof, err := sim.LookupProfile("qwen3-coder-30b-a3b-fp8-h200-vllm")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := sim.NewServer(prof, 1, "vllm")
		go s.Run(ctx)
		ln, stop := memnet.Serve(s.Handler())
		t.Cleanup(stop)
		client := probe.NewClient(false)
		client.Transport.(*http.Transport).DialContext = ln.Dial
		p := probe.NewProber(probe.Endpoint{BaseURL: "http://sim", Client: client}, "chat", "", "vllm")
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
			if got := median(ttfts); math.Abs(got/want.TTFT-1) > 1e-6 {
				t.Errorf("%d tokens: TTFT %.4fs over HTTP, %.4fs predicted", context, got, want.TTFT)
			}
			if got := median(decodes); math.Abs(got/want.Decode-1) > 1e-6 {
				t.Errorf("%d tokens: decode %.1f tok/s over HTTP, %.1f predicted", context, got, want.Decode)
			}
		}
	})
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}
