package sim_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/sim"
)

// RunLoadObserved reports each finished request of the background users,
// as its user saw it, and no other client's: here a completion sent over
// the API while they run is in the engine's TTFT histogram but not among
// the observed requests.
func TestRunLoadObservedIsTheUsersOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prof, err := sim.LookupProfile("qwen3-coder-30b-a3b-fp8-h200-vllm")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		srv := sim.NewServer(prof, 1, "vllm")
		const users, prompt, output = 4, 2048, 64
		var mu sync.Mutex
		var got []sim.Request
		var wg sync.WaitGroup
		wg.Go(func() { srv.Run(ctx) })
		wg.Go(func() {
			srv.RunLoadObserved(ctx, sim.Steps{Levels: []int{users}, Hold: 3600}, []sim.Shape{{Context: prompt, Output: output, Weight: 1}}, 1,
				func(r sim.Request) {
					mu.Lock()
					got = append(got, r)
					mu.Unlock()
				})
		})
		time.Sleep(time.Minute)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions",
			strings.NewReader(`{"prompt": "`+strings.Repeat("word ", 4000)+`", "max_tokens": 8, "ignore_eos": true}`)))
		if rec.Code != http.StatusOK {
			t.Fatalf("completion: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(4 * time.Minute)
		cancel()
		wg.Wait()

		if len(got) < 10 {
			t.Fatalf("%d requests observed in 5 minutes of %d users", len(got), users)
		}
		var sum float64
		for _, r := range got {
			if r.Prompt != prompt || r.Tokens != output || !(r.Submitted < r.FirstToken && r.FirstToken < r.Finished) {
				t.Fatalf("observed %+v", r)
			}
			if math.Abs(r.DecodeTPS()*r.ITL()-1) > 1e-9 || math.Abs(r.E2E()-r.TTFT()-r.ITL()*float64(r.Tokens-1)) > 1e-9 {
				t.Fatalf("%+v: TTFT %g, E2E %g, ITL %g, decode %g disagree", r, r.TTFT(), r.E2E(), r.ITL(), r.DecodeTPS())
			}
			sum += r.TTFT()
		}
		// The engine's histogram has every first token: the observed
		// requests', the completion's and those of the users' requests
		// still running when the load stopped (at most one each).
		count, hsum := histogram(t, srv, "vllm:time_to_first_token_seconds")
		if n := len(got); count < n+1 || count > n+1+users {
			t.Errorf("the engine counted %d first tokens, the users observed %d requests and the API served 1", count, n)
		}
		t.Logf("%d requests observed; the engine counted %d first tokens, TTFTs summing to %.3g s (observed %.3g s)", len(got), count, hsum, sum)
		if hsum < sum {
			t.Errorf("the engine's TTFTs sum to %g, less than the observed ones' %g", hsum, sum)
		}
	})
}

func histogram(t *testing.T, srv *sim.Server, name string) (int, float64) {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var count int
	var sum float64
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		var v float64
		switch {
		case strings.HasPrefix(line, name+"_count"):
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
				t.Fatal(err)
			}
			count += int(v)
		case strings.HasPrefix(line, name+"_sum"):
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
				t.Fatal(err)
			}
			sum += v
		}
	}
	return count, sum
}
