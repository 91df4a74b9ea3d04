package daemon_test

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/scripted"
)

const faultKey = "sk-fault-secret-4242"

// TestFaultyTargets runs the daemon against one fault server per defect of
// issue 21, beside a healthy simulator: each fault ends in its result label
// (or its engine-metrics error) with a log line saying why, records no
// latency sample, leaks no key, and the healthy target keeps its schedule.
func TestFaultyTargets(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", faultKey)
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		tiny := func() http.Handler { return w.tinySimHandler(1000) }
		faults := []struct {
			name    string
			handler http.Handler
			// result is the probe result label expected; "" for faults of the
			// engine's metrics page, which leave probing alone.
			result string
			log    string // in the target's log line
		}{
			{"json-metrics", scripted.WithPath(tiny(), "/metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "{}") }), "", "page truncated"},
			{"inf-metrics", scripted.WithPath(tiny(), "/metrics", func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprint(w, "vllm:num_requests_running +Inf\nvllm:num_requests_waiting 0\n")
			}), "", "has value +Inf"},
			{"dup-metrics", scripted.WithPath(tiny(), "/metrics", func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprint(w, "vllm:num_requests_running 1\nvllm:num_requests_running 5\n")
			}), "", "duplicate series"},
			{"stall-models", scripted.WithPath(tiny(), "/v1/models", scripted.Stall), "timeout", "stage=prepare"},
			{"stall-tokenize", scripted.WithPath(tiny(), "/tokenize", scripted.Stall), "timeout", "stage=prepare"},
			{"stall-stream", scripted.Fake(scripted.Stall), "timeout", "context deadline exceeded"},
			{"echo-key", scripted.Fake(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"error":"bad key: `+r.Header.Get("Authorization")+`"}`, http.StatusUnauthorized)
			}), "http_error", "HTTP 401"},
			{"under-reported-usage", scripted.Fake(scripted.Fixed(64, 5, 64)), "prompt_mismatch", "counted 5 prompt tokens, want 512"},
			{"usage-above-stream", scripted.Fake(scripted.Fixed(2, 512, 64)), "usage_mismatch", "64 completion tokens for 2 bytes of streamed text"},
			{"chunks-over-max", scripted.Fake(scripted.Fixed(640, 512, 0)), "usage_mismatch", "640 content chunks for max_tokens 64"},
		}
		var cfg strings.Builder
		cfg.WriteString("targets:\n")
		target := func(name, url string) {
			fmt.Fprintf(&cfg, "  - {name: %s, url: %q, api_key_env: HEADROOM_TEST_API_KEY}\n", name, url)
		}
		target("healthy", w.serve("healthy", tiny()))
		target("llamacpp", w.serve("llamacpp", scripted.LlamaCpp(tiny(), 4096)))
		for _, f := range faults {
			target(f.name, w.serve(f.name, f.handler))
		}
		// Two slots, as when two stalled targets starved a healthy one.
		cfg.WriteString("max_in_flight: 2\nprobe_budget: 0.5\nengine_scrape_interval: 200ms\n" +
			"scenarios:\n  - {name: s, input_tokens: 512, output_tokens: 64, interval: 1s, timeout: 2s}\n" +
			"use_cases:\n  - {name: u, scenario: s, ttft_max: 1s}\n")
		start := time.Now()
		d := w.startDaemon(writeConfig(t, "", cfg.String()))
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("daemon log:\n%s", d.logs)
			}
		})

		probes := func(m map[string]float64, target, result string) float64 {
			return m[fmt.Sprintf("headroom_probes_total{result=%s,scenario=s,target=%s}", result, target)]
		}
		samples := func(m map[string]float64, target string) float64 {
			return m["headroom_probe_ttft_seconds{scenario=s,target="+target+"}"]
		}
		for _, f := range faults {
			waitFor(t, f.name+"'s failure", 10*time.Second, func() bool {
				m := d.scrape()
				if f.result == "" {
					return m["headroom_target_up{target="+f.name+"}"] == 0 && d.logs.line("target="+f.name+" ", "engine metrics down", f.log)
				}
				return probes(m, f.name, f.result) > 0 && d.logs.line("target="+f.name+" ", "result="+f.result, f.log)
			})
		}
		// Long enough for the healthy target's schedule to say something.
		time.Sleep(time.Until(start.Add(20 * time.Second)))
		m := d.scrape()
		elapsed := time.Since(start)
		// Each success records one sample, no failure any: a fault that
		// recovers (a stalled /tokenize leaves sizing to usage counts) has as
		// many samples as successes, the others none.
		for _, f := range faults {
			if got, want := samples(m, f.name), probes(m, f.name, "success"); got != want {
				t.Errorf("%s: %v latency samples for %v successful probes", f.name, got, want)
			}
		}
		// Every probe of the llama.cpp-shaped server is a success, its prompt
		// within 1% from the first on.
		if n := probes(m, "llamacpp", "success"); n == 0 || probes(m, "llamacpp", "prompt_mismatch") != 0 || samples(m, "llamacpp") != n {
			t.Errorf("llama.cpp-shaped target: %v successes, %v prompt mismatches, %v samples", n, probes(m, "llamacpp", "prompt_mismatch"), samples(m, "llamacpp"))
		}
		if got := m["headroom_probe_input_tokens{scenario=s,target=llamacpp}"]; got < 506.88 || got > 517.12 {
			t.Errorf("llama.cpp-shaped target: prompt of %v tokens, want 512 ± 1%%", got)
		}
		// The healthy target probes every 1 s interval (±10% jitter), or as its
		// budget allows: at least half the intervals that passed.
		if n, want := probes(m, "healthy", "success"), elapsed.Seconds()/1.1/2; n < want {
			t.Errorf("healthy target: %v successful probes in %s, want at least %.0f", n, elapsed.Round(time.Second), want)
		}
		if strings.Contains(d.logs.String(), faultKey) {
			t.Errorf("the API key is in the log")
		}
		d.get("/-/healthy")
		d.get("/api/v1/status")
	})
}

// Two targets on one server (chat and completions of one llama.cpp: one
// metrics URL) are probed one at a time: overlapping, each added its
// prefill to the other's TTFT.
func TestTargetsSharingAServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var inFlight, most, done atomic.Int32
		slow := func(rw http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"max_tokens":1,`)) { // a sizing count
				scripted.Fixed(1, 512, 1)(rw, r)
				return
			}
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(200 * time.Millisecond)
			scripted.Fixed(8, 512, 8)(rw, r)
			done.Add(1)
		}
		mux := http.NewServeMux()
		mux.Handle("/", scripted.Fake(slow))
		mux.HandleFunc("POST /v1/completions", slow)
		url := w.serve("llama", mux)
		w.startDaemon(writeConfig(t, "", fmt.Sprintf("targets:\n  - {name: chat, url: %q, api: chat}\n  - {name: text, url: %q, api: completions}\n"+
			"probe_budget: 0.9\npower: {source: none}\nscenarios: [{name: s, input_tokens: 512, output_tokens: 8, interval: 1s}]\n"+
			"use_cases: [{name: u, scenario: s, ttft_max: 1s}]\ncalibration: {enabled: false}\n", url, url)))
		waitFor(t, "six probes", 10*time.Second, func() bool { return done.Load() >= 6 })
		if m := most.Load(); m != 1 {
			t.Errorf("%d probes of one server in flight at once, want 1", m)
		}
	})
}

// A TLS target is reached through its http_client_config (Prometheus's): a
// CA file to trust its certificate and an authorization credentials_file;
// without the CA, the probe fails as a connect_error saying why.
func TestTLSTargetWithHTTPClientConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		sim := w.tinySimHandler(1000)
		// httptest's certificate names example.com.
		srv := w.serveTLS("example.com", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer sk-from-credentials-file" {
				http.Error(rw, "bad key", http.StatusUnauthorized)
				return
			}
			sim.ServeHTTP(rw, r)
		}))
		dir := t.TempDir()
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		for name, b := range map[string][]byte{"ca.pem": ca, "key": []byte("sk-from-credentials-file\n")} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		d := w.startDaemon(writeConfig(t, dir, fmt.Sprintf(`targets:
  - name: trusted
    url: %[1]q
    http_client_config: {tls_config: {ca_file: ca.pem}, authorization: {credentials_file: key}}
  - name: untrusted
    url: %[1]q
    http_client_config: {authorization: {credentials_file: key}}
probe_budget: 0.5
power: {source: none}
scenarios: [{name: s, input_tokens: 512, output_tokens: 16, interval: 1s}]
use_cases: [{name: u, scenario: s, ttft_max: 1s}]
`, srv.URL)))
		waitFor(t, "probe of each", 10*time.Second, func() bool {
			m := d.scrape()
			return m["headroom_probes_total{result=success,scenario=s,target=trusted}"] >= 1 &&
				m["headroom_probes_total{result=connect_error,scenario=s,target=untrusted}"] >= 1 && m["headroom_target_up{target=trusted}"] == 1
		})
		if !strings.Contains(d.logs.String(), "certificate signed by unknown authority") {
			t.Error("the untrusted target's log line does not say why it failed")
		}
	})
}

// The API key goes to the engine's metrics page only on the target's own
// host: a metrics_url elsewhere (a sidecar, a shared exporter) never sees it.
func TestKeyNotSentToAnotherMetricsHost(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", faultKey)
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		api := w.tinySim("api", 1000)
		var sent atomic.Value
		sent.Store("")
		metrics := w.serve("metrics", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			sent.Store(r.Header.Get("Authorization"))
			fmt.Fprint(rw, scripted.MetricsPage)
		}))
		d := w.startDaemon(writeConfig(t, "", fmt.Sprintf("targets: [{name: a, url: %q, metrics_url: %q, api_key_env: HEADROOM_TEST_API_KEY}]\n"+
			"probe_budget: 0.5\npower: {source: none}\nscenarios: [{name: s, input_tokens: 512, output_tokens: 16, interval: 1s}]\n"+
			"use_cases: [{name: u, scenario: s, ttft_max: 1s}]\n", api, metrics+"/metrics")))
		waitFor(t, "probe and a scrape", 10*time.Second, func() bool {
			m := d.scrape()
			return m["headroom_probes_total{result=success,scenario=s,target=a}"] >= 1 && m["headroom_target_up{target=a}"] == 1
		})
		if got := sent.Load().(string); got != "" {
			t.Errorf("the metrics host got Authorization %q", got)
		}
	})
}
