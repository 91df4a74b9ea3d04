package monitor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/memnet"
)

// slowPages is a fleet of engines whose metrics page comes in two parts a
// second apart. Over memnet's bare pipes (ListenBare) a part is written only
// as the client reads it, so a page counts as being read from when its first part is
// taken to when its last is: what the client holds for it in between.
type slowPages struct {
	mu      sync.Mutex
	reading int
	peak    int
	read    map[string]int // host -> pages read whole
}

func (s *slowPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r) // the targets' probes: not what is measured
		return
	}
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	// The headers are read by the client's transport whatever its slots.
	if rc.Flush() != nil {
		return
	}
	if _, err := io.WriteString(w, "# TYPE vllm:num_requests_running gauge\n"); err != nil || rc.Flush() != nil {
		return
	}
	s.mu.Lock()
	s.reading++
	s.peak = max(s.peak, s.reading)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.reading--
		s.mu.Unlock()
	}()
	time.Sleep(time.Second)
	if _, err := io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"); err != nil || rc.Flush() != nil {
		return
	}
	s.mu.Lock()
	s.read[r.Host]++
	s.mu.Unlock()
}

// However many targets start reading their engines at once, no more than
// pagesAtOnce pages are read at a time across the monitor, each target's
// page is still read, and a monitor stopped while reads wait for a slot
// stops at once.
func TestEnginePagesBounded(t *testing.T) {
	bound := pagesAtOnce()
	n := 2 * bound // two rounds of a second each, under the 10 s timeout
	var yaml strings.Builder
	yaml.WriteString("engine_scrape_interval: 10s\ncalibration: {enabled: false}\n" +
		"scenarios: [{name: s, input_tokens: 64, output_tokens: 8, interval: 1h}]\n" +
		"use_cases: [{name: u, scenario: s, ttft_max: 1s}]\ntargets:\n")
	for i := range n {
		fmt.Fprintf(&yaml, "  - {name: e%d, url: 'http://e%d', engine: vllm}\n", i, i)
	}
	cfg, err := config.Parse([]byte(yaml.String()))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		stop    time.Duration // after the targets start
		allRead bool
	}{
		{"every page read", 5 * time.Second, true},
		{"stopped while reads wait", 500 * time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				engines := &slowPages{read: map[string]int{}}
				ln := memnet.ListenBare()
				hs := &http.Server{Handler: engines}
				var wg sync.WaitGroup
				wg.Go(func() { _ = hs.Serve(ln) })
				mon := New(slog.New(slog.DiscardHandler), collector.NewProbes(prometheus.NewRegistry(), false), nil, nil, WithDial(ln.Dial))
				mon.Apply(ctx, cfg)
				time.Sleep(tc.stop)
				// The peak as the monitor ran: a read cut short by Stop may
				// drain what is left of its page into nothing as it closes.
				engines.mu.Lock()
				peak := engines.peak
				engines.mu.Unlock()
				start := time.Now()
				mon.Stop()
				if d := time.Since(start); d > 0 {
					t.Errorf("Stop took %s with reads waiting for a slot, want at once", d)
				}
				// Waits for the handlers still writing pages nobody reads.
				_ = hs.Shutdown(context.Background())
				wg.Wait()
				engines.mu.Lock()
				defer engines.mu.Unlock()
				if peak != bound {
					t.Errorf("%d pages read at once at the most, want %d (the bound, with %d targets)", peak, bound, n)
				}
				if !tc.allRead {
					return
				}
				for i := range n {
					if host := fmt.Sprintf("e%d", i); engines.read[host] == 0 {
						t.Errorf("%s's page not read in the first %s", host, tc.stop)
					}
				}
			})
		})
	}
}
