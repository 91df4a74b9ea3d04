package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/scripted"
	"github.com/headroom-dev/headroom/sim"
)

const faultKey = "sk-fault-secret-4242"

// metricsPage is a healthy vLLM page for scripted servers.
const metricsPage = "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"

// stall blocks until the client gives up: a server that accepted the
// request and went quiet. It reads the body first: only then does the
// server notice the client hang up.
func stall(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// stream serves a fixed completion stream of chunks content chunks and, if
// usage > 0, a usage chunk counting usage completion tokens and prompt
// prompt tokens, whatever was asked.
func stream(chunks, prompt, usage int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range chunks {
			fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`+"\n\n")
		}
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`+"\n\n")
		if usage > 0 {
			fmt.Fprintf(w, `data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`+"\n\n", prompt, usage)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// fakeServer answers /v1/models and /metrics like a healthy server, has no
// tokenizer, and serves completions with completions.
func fakeServer(completions http.HandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"data":[{"id":"m"}]}`) })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, metricsPage) })
	mux.HandleFunc("POST /v1/chat/completions", completions)
	return mux
}

// withPath serves h, except path, which f answers.
func withPath(h http.Handler, path string, f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			f(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func tinySimHandler(t *testing.T) http.Handler {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := sim.NewServer(sim.Tiny, 1000, "vllm")
	go s.Run(ctx)
	return s.Handler()
}

// TestFaultyTargets runs the daemon against one fault server per defect of
// issue 21, beside a healthy simulator: each fault ends in its result label
// (or its engine-metrics error) with a log line saying why, records no
// latency sample, leaks no key, and the healthy target keeps its schedule.
func TestFaultyTargets(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", faultKey)
	faults := []struct {
		name    string
		handler http.Handler
		// result is the probe result label expected; "" for faults of the
		// engine's metrics page, which leave probing alone.
		result string
		log    string // in the target's log line
	}{
		{"json-metrics", withPath(tinySimHandler(t), "/metrics", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "{}") }), "", "page truncated"},
		{"inf-metrics", withPath(tinySimHandler(t), "/metrics", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "vllm:num_requests_running +Inf\nvllm:num_requests_waiting 0\n")
		}), "", "has value +Inf"},
		{"dup-metrics", withPath(tinySimHandler(t), "/metrics", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "vllm:num_requests_running 1\nvllm:num_requests_running 5\n")
		}), "", "duplicate series"},
		{"stall-models", withPath(tinySimHandler(t), "/v1/models", stall), "timeout", "stage=prepare"},
		{"stall-tokenize", withPath(tinySimHandler(t), "/tokenize", stall), "timeout", "stage=prepare"},
		{"stall-stream", fakeServer(stall), "timeout", "context deadline exceeded"},
		{"echo-key", fakeServer(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"bad key: `+r.Header.Get("Authorization")+`"}`, http.StatusUnauthorized)
		}), "http_error", "HTTP 401"},
		{"under-reported-usage", fakeServer(stream(64, 5, 64)), "prompt_mismatch", "counted 5 prompt tokens, want 512"},
		{"usage-above-stream", fakeServer(stream(2, 512, 64)), "usage_mismatch", "64 completion tokens for 2 bytes of streamed text"},
		{"chunks-over-max", fakeServer(stream(640, 512, 0)), "usage_mismatch", "640 content chunks for max_tokens 64"},
	}
	healthy := httptest.NewServer(tinySimHandler(t))
	t.Cleanup(healthy.Close)
	llama := httptest.NewServer(scripted.LlamaCpp(tinySimHandler(t), 4096))
	t.Cleanup(llama.Close)

	var cfg strings.Builder
	cfg.WriteString("targets:\n")
	target := func(name, url string) {
		fmt.Fprintf(&cfg, "  - {name: %s, url: %q, api_key_env: HEADROOM_TEST_API_KEY}\n", name, url)
	}
	target("healthy", healthy.URL)
	target("llamacpp", llama.URL)
	for _, f := range faults {
		srv := httptest.NewServer(f.handler)
		t.Cleanup(srv.Close)
		target(f.name, srv.URL)
	}
	// Two slots, as when two stalled targets starved a healthy one.
	cfg.WriteString("max_in_flight: 2\nprobe_budget: 0.5\nengine_scrape_interval: 200ms\n" +
		"scenarios:\n  - {name: s, input_tokens: 512, output_tokens: 64, interval: 1s, timeout: 2s}\n" +
		"use_cases:\n  - {name: u, scenario: s, ttft_max: 1s}\n")
	file := writeConfig(t, "", cfg.String())
	start := time.Now()
	base, logs := startDaemon(t, file)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})

	probes := func(m map[string]float64, target, result string) float64 {
		return m[fmt.Sprintf("headroom_probes_total{result=%s,scenario=s,target=%s}", result, target)]
	}
	samples := func(m map[string]float64, target string) float64 {
		return m["headroom_probe_ttft_seconds{scenario=s,target="+target+"}"]
	}
	logLine := func(target, want string) bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "target="+target+" ") && strings.Contains(l, want) {
				return true
			}
		}
		return false
	}
	for _, f := range faults {
		waitFor(t, f.name+"'s failure", func() bool {
			m := scrape(t, base)
			if f.result == "" {
				return m["headroom_target_up{target="+f.name+"}"] == 0 && logLine(f.name, "engine metrics down") && logLine(f.name, f.log)
			}
			return probes(m, f.name, f.result) > 0 && logLine(f.name, "result="+f.result) && logLine(f.name, f.log)
		})
	}
	// Long enough for the healthy target's schedule to say something.
	time.Sleep(time.Until(start.Add(6 * time.Second)))
	m := scrape(t, base)
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
	if strings.Contains(logs.String(), faultKey) {
		t.Errorf("the API key is in the log")
	}
	if resp, err := http.Get(base + "/-/healthy"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("daemon not healthy after the faults: %v", err)
	}
	if resp, err := http.Get(base + "/api/v1/status"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status: %v %v", resp, err)
	}
}

// A sweep in which every request failed (llama.cpp refusing 262K-token
// prompts with HTTP 400) exits non-zero, and its report says how it failed,
// never that a single request breaches.
func TestBenchEveryRequestFailed(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", faultKey)
	srv := httptest.NewServer(fakeServer(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"the request exceeds the available context size; key `+r.Header.Get("Authorization")+`"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	out := t.TempDir()
	code := run([]string{"bench", "--url", srv.URL, "--api-key-env", "HEADROOM_TEST_API_KEY", "--contexts", "1024", "--concurrency", "1,2",
		"--output-tokens", "16", "--warmup", "0", "--engine", "none", "--out", out})
	if code == 0 {
		t.Error("bench exited 0 when every request failed")
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(md), "single request breaches") || !strings.Contains(string(md), "failed: at 1, every request failed: 2 http_error: post") ||
		!strings.Contains(string(md), "exceeds the available context size") {
		t.Errorf("report.md does not say the sweep failed and why:\n%s", md)
	}
	for _, f := range []string{"report.md", "report.json", "report.html", "report.csv"} {
		if b, _ := os.ReadFile(filepath.Join(out, f)); strings.Contains(string(b), faultKey) {
			t.Errorf("%s carries the API key", f)
		}
	}
}

// Two targets on one server (chat and completions of one llama.cpp: one
// metrics URL) are probed one at a time: overlapping, each added its
// prefill to the other's TTFT.
func TestTargetsSharingAServer(t *testing.T) {
	var inFlight, most, done atomic.Int32
	slow := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"max_tokens":1,`)) { // a sizing count
			stream(1, 512, 1)(w, r)
			return
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(200 * time.Millisecond)
		stream(8, 512, 8)(w, r)
		done.Add(1)
	}
	mux := http.NewServeMux()
	mux.Handle("/", fakeServer(slow))
	mux.HandleFunc("POST /v1/completions", slow)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cfg := fmt.Sprintf("targets:\n  - {name: chat, url: %q, api: chat}\n  - {name: text, url: %q, api: completions}\n"+
		"probe_budget: 0.9\npower: {source: none}\nscenarios: [{name: s, input_tokens: 512, output_tokens: 8, interval: 1s}]\n"+
		"use_cases: [{name: u, scenario: s, ttft_max: 1s}]\ncalibration: {enabled: false}\n", srv.URL, srv.URL)
	file := writeConfig(t, "", cfg)
	startDaemon(t, file)
	waitFor(t, "six probes", func() bool { return done.Load() >= 6 })
	if m := most.Load(); m != 1 {
		t.Errorf("%d probes of one server in flight at once, want 1", m)
	}
}

// A TLS target is reached through its http_client_config (Prometheus's): a
// CA file to trust its certificate and an authorization credentials_file;
// without the CA, the probe fails as a connect_error saying why.
func TestTLSTargetWithHTTPClientConfig(t *testing.T) {
	sim := tinySimHandler(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-from-credentials-file" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		sim.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for name, b := range map[string][]byte{"ca.pem": ca, "key": []byte("sk-from-credentials-file\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`targets:
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
`, srv.URL)
	file := writeConfig(t, dir, cfg)
	base, logs := startDaemon(t, file)
	waitFor(t, "a probe of each", func() bool {
		m := scrape(t, base)
		return m["headroom_probes_total{result=success,scenario=s,target=trusted}"] >= 1 &&
			m["headroom_probes_total{result=connect_error,scenario=s,target=untrusted}"] >= 1 && m["headroom_target_up{target=trusted}"] == 1
	})
	if !strings.Contains(logs.String(), "certificate signed by unknown authority") {
		t.Error("the untrusted target's log line does not say why it failed")
	}
}

// The API key goes to the engine's metrics page only on the target's own
// host: a metrics_url elsewhere (a sidecar, a shared exporter) never sees it.
func TestKeyNotSentToAnotherMetricsHost(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", faultKey)
	api := httptest.NewServer(tinySimHandler(t))
	defer api.Close()
	var sent atomic.Value
	sent.Store("")
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Store(r.Header.Get("Authorization"))
		fmt.Fprint(w, metricsPage)
	}))
	defer metrics.Close()
	file := writeConfig(t, "", fmt.Sprintf("targets: [{name: a, url: %q, metrics_url: %q, api_key_env: HEADROOM_TEST_API_KEY}]\n"+
		"probe_budget: 0.5\npower: {source: none}\nscenarios: [{name: s, input_tokens: 512, output_tokens: 16, interval: 1s}]\n"+
		"use_cases: [{name: u, scenario: s, ttft_max: 1s}]\n", api.URL, metrics.URL+"/metrics"))
	base, _ := startDaemon(t, file)
	waitFor(t, "a probe and a scrape", func() bool {
		m := scrape(t, base)
		return m["headroom_probes_total{result=success,scenario=s,target=a}"] >= 1 && m["headroom_target_up{target=a}"] == 1
	})
	if got := sent.Load().(string); got != "" {
		t.Errorf("the metrics host on another port got Authorization %q", got)
	}
}
