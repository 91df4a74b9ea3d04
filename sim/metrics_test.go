package sim_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/sim"
)

// TestCountersCountFinishedSteps reads the simulator's prompt counter while
// a 32K prompt's first prefill step runs and after its first token. The
// engine does a step's work at its start; a server counts it at its end,
// and a burst's level (the prompts prefilled between a reading before it
// and its last first token) missed a production chunk whose step was under
// way when the burst was sent, while the burst waited for that step.
func TestCountersCountFinishedSteps(t *testing.T) {
	prof, err := sim.LookupProfile("qwen3-coder-next-fp8-h200-sglang")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := sim.NewServer(prof, 1, "vllm")
		ln, stop := memnet.Serve(s.Handler())
		var wg sync.WaitGroup
		wg.Go(func() { s.Run(ctx) })
		client := &http.Client{Transport: &http.Transport{DialContext: ln.Dial}}
		prompted := func() float64 {
			l, err := engine.Scrape(ctx, client, "http://sim/metrics", "", "vllm")
			if err != nil {
				t.Fatal(err)
			}
			return l.PromptTokens
		}
		body := `{"prompt": "` + strings.Repeat("abc ", 32768) + `", "max_tokens": 4, "stream": true}`
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			resp, err := client.Post("http://sim/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			_, _ = resp.Body.Read(make([]byte, 1)) // the first token's event
		})
		// The profile's overhead is 0.33 s and its first step, 24574 of the
		// prompt's tokens, takes 0.81 s: at 0.6 s it is under way.
		time.Sleep(600 * time.Millisecond)
		if got := prompted(); got != 0 {
			t.Errorf("mid-step: %g prompt tokens counted, want 0: the step has not ended", got)
		}
		<-done
		if got := prompted(); got != 32768 {
			t.Errorf("after the first token: %g prompt tokens counted, want 32768", got)
		}
		cancel()
		stop()
		wg.Wait()
	})
}
