// Package virtual runs the shipped monitor and estimator against a
// simulated server on an in-memory network, for tests that read what a
// user would see after minutes or hours, inside a testing/synctest bubble
// (virtual time).
package virtual

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/sim"
)

// Run is the shipped monitor and estimator probing one simulated server.
type Run struct {
	Est *estimator.Estimator
	Mon *monitor.Monitor
	// Reg holds the monitor's probe series.
	Reg    *prometheus.Registry
	cancel context.CancelFunc
	stop   func()
	wg     sync.WaitGroup
}

// Start serves srv on an in-memory network, runs its engine and, for each
// of loads, a background load of it until Stop, and applies cfg (its
// targets' URLs name any host: every dial reaches srv) to a monitor and
// estimator as the daemon wires them. Call it inside a synctest bubble.
func Start(cfg *config.Config, srv *sim.Server, loads ...func(ctx context.Context)) *Run {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Run{cancel: cancel, Reg: prometheus.NewRegistry()}
	ln, stop := memnet.Serve(srv.Handler())
	r.stop = stop
	r.wg.Go(func() { srv.Run(ctx) })
	for _, load := range loads {
		r.wg.Go(func() { load(ctx) })
	}
	r.Est = estimator.New(cfg, nil)
	r.Mon = monitor.New(slog.New(slog.DiscardHandler), collector.NewProbes(r.Reg, false), r.Est, r.Est, monitor.WithDial(ln.Dial))
	r.Mon.Apply(ctx, cfg)
	return r
}

// Stop stops the monitor, the server and its loads, and waits for them.
func (r *Run) Stop() {
	r.Mon.Stop()
	r.cancel()
	r.stop()
	r.wg.Wait()
}
