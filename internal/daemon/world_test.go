package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/internal/contract"
	"github.com/headroom-dev/headroom/internal/daemon"
	"github.com/headroom-dev/headroom/internal/exposition"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/sim"
)

// world is one test's in-memory network, made inside its synctest bubble:
// the servers it starts listen on it and the daemons dial it, so that time
// is virtual and a test waits for an hour of probes in no time. Everything
// it started stops when the test ends.
type world struct {
	t      *testing.T
	net    memnet.Network
	ctx    context.Context
	client *http.Client // reaches every server of the world
	wg     sync.WaitGroup
	mu     sync.Mutex
	stops  []func()
	hosts  int
}

// newWorld must be called inside synctest.Test.
func newWorld(t *testing.T) *world {
	ctx, cancel := context.WithCancel(context.Background())
	w := &world{t: t, ctx: ctx}
	w.client = &http.Client{Transport: &http.Transport{DialContext: w.net.Dial}}
	t.Cleanup(func() {
		cancel()
		w.client.CloseIdleConnections()
		w.mu.Lock()
		stops := w.stops
		w.mu.Unlock()
		for _, stop := range slices.Backward(stops) {
			stop()
		}
		w.wg.Wait()
	})
	return w
}

func (w *world) onStop(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stops = append(w.stops, f)
}

// serve serves h at host:80 and returns its base URL.
func (w *world) serve(host string, h http.Handler) string {
	l := w.net.Listen(host + ":80")
	// Its handlers are waited for too: one asleep as the test ends would
	// outlive the bubble.
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.wg.Add(1)
		defer w.wg.Done()
		h.ServeHTTP(rw, r)
	})}
	w.wg.Go(func() { _ = srv.Serve(l) })
	w.onStop(func() { _ = srv.Close() })
	return "http://" + host
}

// serveTLS serves h over TLS at host:443 with httptest's certificate.
func (w *world) serveTLS(host string, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close() // a loopback port, never used
	srv.Listener = w.net.Listen(host + ":443")
	srv.StartTLS()
	w.onStop(srv.Close)
	return srv
}

// tinySim serves the fast test profile at host, its time scale scale.
func (w *world) tinySim(host string, scale float64) string {
	return w.serve(host, w.tinySimHandler(scale))
}

func (w *world) tinySimHandler(scale float64) http.Handler {
	s := sim.NewServer(sim.Tiny, scale, "vllm")
	w.wg.Go(func() { s.Run(w.ctx) })
	return s.Handler()
}

// daemon is a running daemon as its test sees it.
type runningDaemon struct {
	w    *world
	d    *daemon.Daemon
	url  string
	logs *syncWriter
}

// startDaemon runs the daemon on a config file, /-/reload enabled.
func (w *world) startDaemon(cfgFile string) *runningDaemon {
	w.t.Helper()
	return w.start(func() (*config.Config, error) { return config.Load(cfgFile) }, fleet.Shard{}, true)
}

// start runs a daemon of load as one shard, until the test ends.
func (w *world) start(load func() (*config.Config, error), shard fleet.Shard, lifecycle bool) *runningDaemon {
	w.t.Helper()
	return w.startLogging(load, shard, lifecycle, &syncWriter{})
}

// startLogging is start logging into logs.
func (w *world) startLogging(load func() (*config.Config, error), shard fleet.Shard, lifecycle bool, logs *syncWriter) *runningDaemon {
	w.t.Helper()
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := daemon.New(logger, shard, load, daemon.WithDial(w.net.Dial))
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.hosts++
	host := fmt.Sprintf("headroom-%d", w.hosts)
	w.mu.Unlock()
	l := w.net.Listen(host + ":80")
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() {
		noFile, noSocket := "", false
		done <- d.Serve(ctx, []net.Listener{l}, &web.FlagConfig{WebListenAddresses: &[]string{}, WebConfigFile: &noFile, WebSystemdSocket: &noSocket}, lifecycle)
	}()
	w.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("serve: %v", err)
		}
	})
	return &runningDaemon{w: w, d: d, url: "http://" + host, logs: logs}
}

// get returns a page of the daemon; it fails the test unless it is a 200.
func (r *runningDaemon) get(path string) string {
	r.w.t.Helper()
	resp, err := r.w.client.Get(r.url + path)
	if err != nil {
		r.w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		r.w.t.Fatalf("GET %s: HTTP %d, %v", path, resp.StatusCode, err)
	}
	return string(b)
}

// reload posts /-/reload and returns its status and answer.
func (r *runningDaemon) reload() (int, string) {
	r.w.t.Helper()
	resp, err := r.w.client.Post(r.url+"/-/reload", "", nil)
	if err != nil {
		r.w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape returns the value of every sample, keyed by name{labels}; a
// histogram's is its count.
func (r *runningDaemon) scrape() map[string]float64 {
	r.w.t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(r.get("/metrics")))
	if err != nil {
		r.w.t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// checkContract holds every headroom_ family on the daemon's page to the
// metric contract: its name, type and labels.
func (r *runningDaemon) checkContract() {
	r.w.t.Helper()
	mfs, err := exposition.Families(strings.NewReader(r.get("/metrics")), 64<<20, func(name string) bool { return strings.HasPrefix(name, "headroom_") })
	if err != nil {
		r.w.t.Fatal(err)
	}
	if err := contract.Check(mfs); err != nil {
		r.w.t.Error(err)
	}
}

// waitFor checks cond every 100 ms of virtual time until it holds, for at
// most within: the bound is the test's expectation of the daemon, and a
// slow machine does not move it.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	waitEvery(t, what, within, 100*time.Millisecond, cond)
}

// waitEvery is waitFor checking every period: a condition that reads
// large pages costs real time at each check.
func waitEvery(t *testing.T, what string, within, period time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, within)
		}
		time.Sleep(period)
	}
}

type syncWriter struct {
	mu  sync.Mutex
	b   []byte
	max int // bytes kept, the latest; 0: all
}

// Write keeps, under max, the latest half of the log in the same array: a
// buffer that grew and shrank as it filled would move the heap that
// TestFleetHeapFlat reads by a megabyte either way.
func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	if s.max > 0 && s.b == nil {
		s.b = make([]byte, 0, s.max)
	}
	if s.max > 0 && len(s.b)+len(p) > s.max {
		if len(p) > s.max/2 {
			p = p[len(p)-s.max/2:]
		}
		s.b = append(s.b[:0], s.b[len(s.b)-min(len(s.b), s.max/2-len(p)):]...)
	}
	s.b = append(s.b, p...)
	return n, nil
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// line says whether one line of the log holds every want.
func (s *syncWriter) line(want ...string) bool {
	for _, l := range strings.Split(s.String(), "\n") {
		if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(l, w) }) {
			return true
		}
	}
	return false
}

// writeConfig writes a configuration file into dir (a new temporary one
// for "") and returns its path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	file := filepath.Join(dir, "headroom.yml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// testConfig probes one target, sim at url, with the named scenarios.
func testConfig(url string, scenarios ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "targets:\n  - name: sim\n    url: %s\n    api_key_env: HEADROOM_TEST_API_KEY\nprobe_budget: 0.5\nengine_scrape_interval: 100ms\nscenarios:\n", url)
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  - name: %s\n    input_tokens: 512\n    output_tokens: 16\n    interval: 1s\n", s)
	}
	b.WriteString("use_cases:\n  - name: chat\n    scenario: " + scenarios[0] + "\n    ttft_max: 1s\n")
	return b.String()
}
