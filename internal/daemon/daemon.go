// Package daemon is headroom's probe daemon: it loads the configuration,
// follows discovery, reloads, seeds the capacity model from bench reports,
// runs the monitor and serves the exporter's pages, all wired in one place.
// Its network is injectable (WithDial), so that its tests run the whole
// daemon in a testing/synctest bubble over internal/memnet.
package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/power"
	"github.com/headroom-dev/headroom/statuspage"
)

// Daemon wires configuration, discovery, monitor, capacity model and
// exporter together.
type Daemon struct {
	logger *slog.Logger
	load   func() (*config.Config, error)
	dial   monitor.DialFunc // nil: the network's
	reg    *prometheus.Registry
	// streamed are the collectors of a fleet's many series, which
	// /metrics writes straight in the text format (metricsHandler).
	streamed []collector.TextWriter
	mon      *monitor.Monitor
	est      *estimator.Estimator

	reloadOK   prometheus.Gauge
	reloadTime prometheus.Gauge

	// reloads carries reload requests (SIGHUP, /-/reload) to the one
	// goroutine that applies them, in order; each gets its error back.
	reloads chan chan error
	power   power.Swappable
	probes  *collector.Probes
	fleet   *fleet.Fleet
	started time.Time

	mu sync.Mutex
	// base is the configuration file as loaded, cfg what runs: base with
	// the targets that discovery found and this shard owns.
	base, cfg *config.Config
	ctx       context.Context
}

// Option changes how the daemon reaches the world.
type Option func(*Daemon)

// WithDial replaces the network under every connection the daemon opens:
// to its targets, their engines, http_sd endpoints and a DCGM exporter.
func WithDial(dial monitor.DialFunc) Option { return func(d *Daemon) { d.dial = dial } }

// New loads the configuration and its capacity seeds with load; an error
// in either is returned, and nothing runs until Serve.
func New(logger *slog.Logger, shard fleet.Shard, load func() (*config.Config, error), opts ...Option) (*Daemon, error) {
	d := &Daemon{logger: logger, load: load, reloads: make(chan chan error),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful."}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "headroom_config_last_reload_success_timestamp_seconds",
			Help: "Timestamp of the last successful configuration reload."}),
	}
	for _, o := range opts {
		o(d)
	}
	base, err := load()
	if err != nil {
		return nil, err
	}
	if _, err := estimator.LoadSeeds(base); err != nil {
		return nil, err
	}
	d.reg = prometheus.NewRegistry()
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector("headroom"), d.reloadOK, d.reloadTime)
	if d.fleet, err = fleet.New(logger, d.reg, shard, fleet.WithDial(d.dial)); err != nil {
		return nil, err
	}
	// Discovery has found nothing yet: the static targets start alone.
	cfg := d.fleet.Config(base)
	seeds, _ := estimator.LoadSeeds(cfg) // read above; discovery added nothing
	d.base, d.cfg, d.est = base, cfg, estimator.New(cfg, seeds)
	d.warn(cfg)
	// Registered by metricsHandler, not in d.reg.
	d.probes, d.started = collector.NewProbes(nil, cfg.ProbeHistograms == "native"), time.Now()
	var monOpts []monitor.Option
	if d.dial != nil {
		monOpts = append(monOpts, monitor.WithDial(d.dial))
	}
	d.mon = monitor.New(logger, d.probes, d.est, d.est, monOpts...)
	d.power.Set(OpenPower(logger, cfg.Power, d.dial))
	d.streamed = []collector.TextWriter{d.probes, collector.NewCapacity(d.est.UseCases, d.estimates)}
	d.reg.MustRegister(collector.NewTargets(d.mon.Status),
		collector.NewPower(logger, d.powerSource, func() map[string]string { return gpuTargets(d.config()) }, d.generationTokens))
	d.reloadOK.Set(1)
	d.reloadTime.SetToCurrentTime()
	return d, nil
}

// Reload has the running daemon load its configuration again, after any
// reload or discovery update before it, and returns its error: a bad file
// keeps the running configuration. It waits for Serve's loop, or ctx.
func (d *Daemon) Reload(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case d.reloads <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reload loads the configuration again; a bad file keeps the running one.
// Only Serve's apply loop calls it, so reloads never overlap.
func (d *Daemon) reload() error {
	base, err := d.load()
	if err == nil {
		_, err = estimator.LoadSeeds(base)
	}
	if err == nil && base.ProbeHistograms != d.config().ProbeHistograms {
		err = fmt.Errorf("probe_histograms: changing it from %s to %s needs a restart", d.config().ProbeHistograms, base.ProbeHistograms)
	}
	if err == nil {
		err = d.fleet.Discover(base)
	}
	if err != nil {
		d.reloadOK.Set(0)
		d.logger.Error("reload config: keeping the running configuration", "err", err)
		return err
	}
	d.apply(base)
	d.reloadOK.Set(1)
	d.reloadTime.SetToCurrentTime()
	d.warn(base)
	cfg := d.config()
	d.logger.Info("reloaded config", "targets", len(cfg.Targets), "discovery", len(cfg.Discovery), "scenarios", len(cfg.Scenarios), "use_cases", len(cfg.UseCases))
	return nil
}

// apply runs base with the targets the fleet holds now: after a reload,
// and whenever discovery finds a change. Only Serve's apply loop calls it.
func (d *Daemon) apply(base *config.Config) {
	cfg := d.fleet.Config(base)
	seeds, err := estimator.LoadSeeds(cfg)
	if err != nil {
		// The reload read these; a file gone since costs its seed, not the fleet.
		d.logger.Warn("capacity seeds", "err", err)
	}
	d.mu.Lock()
	old := d.cfg
	d.base, d.cfg = base, cfg
	ctx := d.ctx
	d.mu.Unlock()
	if added, removed := changes(old.Targets, cfg.Targets); added+removed > 0 {
		d.logger.Info("targets changed", "added", added, "removed", removed, "probed", len(cfg.Targets))
	}
	d.est.Configure(cfg, seeds)
	if cfg.Power != old.Power {
		d.power.Set(OpenPower(d.logger, cfg.Power, d.dial))
	}
	d.mon.Apply(ctx, cfg)
}

// changes counts the targets, by name, that are in now and not in before
// (added) and the other way round.
func changes(before, now []config.Target) (added, removed int) {
	names := map[string]int{}
	for _, t := range before {
		names[t.Name]--
	}
	for _, t := range now {
		names[t.Name]++
	}
	for _, n := range names {
		if n > 0 {
			added++
		} else if n < 0 {
			removed++
		}
	}
	return added, removed
}

// warn logs, once per load, what in the configuration can never work.
func (d *Daemon) warn(cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		d.logger.Warn("configuration", "problem", w)
	}
}

// Handler serves the daemon's pages; lifecycle enables /-/reload.
func (d *Daemon) Handler(lifecycle bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(d.logger, d.reg, d.streamed...))
	mux.HandleFunc("/api/v1/status", d.status)
	mux.HandleFunc("/status", d.statusPage)
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy") })
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		ready, text := collector.Readiness(d.mon.Status())
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, text)
	})
	mux.Handle("/-/reload", reloadGuard(lifecycle, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "use POST or PUT", http.StatusMethodNotAllowed)
			return
		}
		err := d.Reload(r.Context())
		switch {
		case r.Context().Err() != nil:
			return
		case err != nil:
			http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "Reloaded")
	})))
	mux.HandleFunc("/", d.landing)
	return mux
}

// reloadGuard answers 403 for /-/reload unless the lifecycle API is
// enabled, as Prometheus does, and even then refuses a browser's
// cross-site request (net/http's CrossOriginProtection reads Sec-Fetch-Site
// and Origin): a page elsewhere could otherwise POST a form or a
// text/plain fetch to a daemon on localhost. Clients that send neither
// header (curl, a config reloader sidecar) pass.
func reloadGuard(lifecycle bool, next http.Handler) http.Handler {
	if !lifecycle {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Lifecycle API is not enabled: start headroom with --web.enable-lifecycle, or send SIGHUP", http.StatusForbidden)
		})
	}
	return http.NewCrossOriginProtection().Handler(next)
}

// Serve starts discovery and probing, serves the daemon's pages on
// listeners (web: the exporter-toolkit's TLS and basic auth settings;
// lifecycle: POST /-/reload) and applies reloads and discovery's changes,
// until ctx ends or the server fails. It closes the listeners and stops
// everything it started before it returns.
func (d *Daemon) Serve(ctx context.Context, listeners []net.Listener, wf *web.FlagConfig, lifecycle bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.mu.Lock()
	d.ctx = ctx
	cfg, base := d.cfg, d.base
	d.mu.Unlock()
	run, err := d.fleet.Start(ctx)
	if err != nil {
		for _, l := range listeners {
			l.Close()
		}
		return fmt.Errorf("discovery: %w", err)
	}
	d.mon.Apply(ctx, cfg)
	var wg sync.WaitGroup
	wg.Go(run)
	if err := d.fleet.Discover(base); err != nil {
		d.logger.Error("discovery", "err", err)
	}
	wg.Go(func() { d.applyLoop(ctx) })

	srv := &http.Server{Handler: d.Handler(lifecycle), ReadHeaderTimeout: 10 * time.Second}
	for _, l := range listeners {
		d.logger.Info("listening", "address", l.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- web.ServeMultiple(listeners, srv, wf, d.logger) }()
	select {
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	case <-ctx.Done():
		d.logger.Info("shutting down")
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		scancel()
		<-errc
	}
	// Stop in reverse: no more reloads, then the probes and the estimates
	// they set off, then the power source.
	cancel()
	wg.Wait()
	d.mon.Stop()
	d.est.Close()
	d.power.Close()
	return err
}

// applyLoop applies reloads and discovery's changes, in the order they
// come, as blackbox_exporter does: a slow reload cannot finish after a
// newer one, nor a discovery update land on an older file.
func (d *Daemon) applyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case reply := <-d.reloads:
			reply <- d.reload()
		case groups, ok := <-d.fleet.Updates():
			if !ok { // discovery stopped: ctx has ended
				return
			}
			d.fleet.Update(groups)
			d.mu.Lock()
			base := d.base
			d.mu.Unlock()
			d.apply(base)
		}
	}
}

func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// estimates evaluates every target and use case of the running configuration now.
func (d *Daemon) estimates() []capacity.Estimate {
	return d.est.Estimates(d.mon.Status(), time.Now())
}

// status encodes into a buffer first: a value JSON cannot carry is a 500
// with its error, not a 200 with half a document.
func (d *Daemon) status(w http.ResponseWriter, _ *http.Request) {
	b, err := json.MarshalIndent(map[string]any{"estimates": d.estimates()}, "", "  ")
	if err != nil {
		d.logger.Error("encode status", "err", err)
		http.Error(w, "encode status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// landing is the landing page, built on each request so that it names the
// targets of the configuration running now.
func (d *Daemon) landing(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	b.WriteString("<h2>Probing</h2><ul>")
	for _, t := range d.config().Targets {
		pool := ""
		if t.Pool != "" {
			pool = " (pool " + html.EscapeString(t.Pool) + ")"
		}
		fmt.Fprintf(&b, "<li>%s%s: %s</li>", html.EscapeString(t.Name), pool, html.EscapeString(t.URL))
	}
	b.WriteString("</ul>")
	// Not among the toolkit's links: it prefixes each with a slash, which
	// made this one /https://github.com/... on the daemon itself.
	b.WriteString(`<p><a href="https://github.com/headroom-dev/headroom/tree/main/docs">Documentation</a></p>`)
	page, err := web.NewLandingPage(web.LandingConfig{
		Name:        "headroom",
		Description: "Prometheus exporter and SLO capacity monitor for LLM inference servers",
		Version:     version.Info(),
		Links: []web.LandingLinks{
			{Address: "/status", Text: "Capacity status", Description: "per target and use case: capacity, load, headroom and the curves behind them"},
			{Address: "/metrics", Text: "Metrics"},
			{Address: "/api/v1/status", Text: "Capacity status (JSON)"},
			{Address: "/-/healthy", Text: "Health"},
		},
		ExtraHTML: b.String(),
		// The daemon serves no /debug/pprof: the toolkit's links would 404.
		Profiling: "false",
	})
	if err != nil {
		http.Error(w, "landing page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	page.ServeHTTP(w, r)
}

// statusPage is the human view of /api/v1/status (package statuspage).
func (d *Daemon) statusPage(w http.ResponseWriter, _ *http.Request) {
	cfg := d.config()
	var targets []statuspage.Target
	for _, s := range d.mon.Status() {
		targets = append(targets, statuspage.Target{TargetStatus: s, Busy: d.probes.Busy(s.Name), Since: d.started, Budget: cfg.ProbeBudget})
	}
	var b bytes.Buffer
	if err := statuspage.Render(&b, targets, d.estimates(), time.Now(), 30*time.Second); err != nil {
		d.logger.Error("render status page", "err", err)
		http.Error(w, "render status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// powerSource is the power source for the collector, nil when there is none.
func (d *Daemon) powerSource() power.Source {
	if !d.power.Has() {
		return nil
	}
	return &d.power
}

func (d *Daemon) generationTokens() map[string]float64 {
	out := map[string]float64{}
	for _, s := range d.mon.Status() {
		if s.Up {
			out[s.Name] = s.Load.GenerationTokens
		}
	}
	return out
}
