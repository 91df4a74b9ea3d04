package monitor_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/sim"
)

// firstSample notes when the first probe was recorded.
type firstSample struct {
	monitor.Recorder
	mu    sync.Mutex
	first time.Time
}

func (f *firstSample) Record(s monitor.Sample) {
	f.mu.Lock()
	if f.first.IsZero() {
		f.first = time.Now()
	}
	f.mu.Unlock()
	f.Recorder.Record(s)
}

// A target down at start (a server still loading its model) is retried
// from seconds, doubling, not at its scenario's 5-minute interval: its
// first sample comes within a minute of its coming up (issue 39: "next
// probe in 3m24s"). The shipped monitor in virtual time, over memnet.
func TestFailedTargetRetriedWithBackoff(t *testing.T) {
	cfg, err := config.Parse([]byte(`
targets: [{name: sim, url: 'http://sim'}]
scenarios: [{name: s, input_tokens: 256, output_tokens: 8, interval: 5m}]
use_cases: [{name: u, scenario: s, ttft_max: 2s}]
calibration: {enabled: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := sim.NewServer(sim.Tiny, 1, "vllm")
		start := time.Now()
		const down = 45 * time.Second
		ln, stop := memnet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if time.Since(start) < down {
				http.Error(w, "loading model", http.StatusServiceUnavailable)
				return
			}
			srv.Handler().ServeHTTP(w, r)
		}))
		var wg sync.WaitGroup
		wg.Go(func() { srv.Run(ctx) })
		est := estimator.New(cfg, nil)
		rec := &firstSample{Recorder: est}
		mon := monitor.New(slog.New(slog.DiscardHandler), collector.NewProbes(prometheus.NewRegistry(), false), rec, est, monitor.WithDial(ln.Dial))
		mon.Apply(ctx, cfg)
		var nextWhileDown time.Duration
		for range 300 {
			time.Sleep(time.Second)
			if time.Since(start) == down-5*time.Second {
				for _, s := range mon.Status() {
					nextWhileDown = time.Until(s.Next["s"])
				}
			}
		}
		mon.Stop()
		cancel()
		stop()
		wg.Wait()
		if nextWhileDown <= 0 || nextWhileDown > time.Minute {
			t.Errorf("while the server was down the next probe was %s away, want a retry within a minute", nextWhileDown)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.first.IsZero() || rec.first.Sub(start) > down+time.Minute {
			t.Errorf("first sample %s after start, the server up from %s: want it within a minute of that", rec.first.Sub(start), down)
		}
	})
}
