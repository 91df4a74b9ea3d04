package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
)

// Secrets of the hardening cases: each must appear nowhere, nor any of
// their prefixes of 6 characters or more.
const (
	hardKey    = "Zq9-hardening-key-77e1"
	hardHeader = "Hx4-header-secret-0b2c"
)

// capture runs f with the process's stdout and stderr in a file, and
// returns its exit code and what it printed.
func capture(t *testing.T, f func() int) (int, string) {
	t.Helper()
	file, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = file, file
	code := f()
	os.Stdout, os.Stderr = stdout, stderr
	b, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}

// noSecret fails the test where text holds a secret of the cases or a
// prefix of one that a cut could leave.
func noSecret(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range []string{hardKey, hardHeader} {
		for k := 6; k <= len(s); k++ {
			if strings.Contains(text, s[:k]) {
				t.Errorf("%s carries %q of a secret", where, s[:k])
				break
			}
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// benchReport is bench's recorded sweep with edit applied to its JSON,
// written as dir/report.json.
func benchReport(t *testing.T, dir string, edit func(r map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile("../../bench/testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	edit(r)
	if b, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "report.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func reportCell(r map[string]any, i int) map[string]any {
	return r["cells"].([]any)[i].(map[string]any)
}

// models answers /v1/models with id, or with the key it was sent for "".
func models(id string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id == "" {
			id = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		fmt.Fprintf(w, `{"data":[{"id":%q}]}`, id)
	}
}

// drip writes a byte a second until the client hangs up.
func drip(w http.ResponseWriter, r *http.Request) {
	for r.Context().Err() == nil {
		if _, err := w.Write([]byte(" ")); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}
}

// forever streams content chunks until the client hangs up.
func forever(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for r.Context().Err() == nil {
		if _, err := fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}`+"\n\n"); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		time.Sleep(time.Millisecond)
	}
}

// scaled answers /metrics as a simulator at 20x real time (a request's
// deadline a twentieth of a real server's, so that a stall costs the test
// seconds) and everything else with h.
func scaled(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, metricsPage+"headroom_sim_info{time_scale=\"20\"} 1\n")
			return
		}
		h(w, r)
	})
}

// TestHardening runs each case of issue 37 against loopback servers. The
// daemon's cases share one daemon; every log line, page, metric and report
// of every case is searched for the secrets.
func TestHardening(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", hardKey)
	dir := t.TempDir()
	serve := func(h http.Handler) *httptest.Server {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}

	// The daemon's targets, one per case.
	pad := 256 - len(hardKey) + 1 // the 256-byte cut falls inside the key's last character
	echoCut := serve(fakeServer(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, strings.Repeat("p", pad)+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+" and more", http.StatusInternalServerError)
	}))
	headers := serve(fakeServer(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad header X-Api-Key: "+r.Header.Get("X-Api-Key"), http.StatusInternalServerError)
	}))
	var leaked atomic.Value
	leaked.Store("")
	elsewhere := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked.Store(a)
		}
		fakeServer(stream(16, 512, 16)).ServeHTTP(w, r)
	}))
	redirect := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	keyModel := serve(withPath(fakeServer(stream(16, 512, 16)), "/v1/models", models("")))
	v1 := serve(fakeServer(stream(16, 512, 16)))
	endless := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(`[{"targets":["h:1"],"labels":{"x":"` + strings.Repeat("y", 64<<10) + `"}},`)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	sd := []map[string]any{
		{"targets": []string{"127.0.0.1:1"}, "labels": map[string]string{"target": strings.Repeat("x", 100_000)}},
		{"targets": []string{"127.0.0.1:2"}, "labels": map[string]string{"target": "reload", "__url__": "http://127.0.0.1:9835/-/reload?"}},
	}
	b, _ := json.Marshal(sd)
	if err := os.WriteFile(filepath.Join(dir, "sd.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	file := writeConfig(t, dir, fmt.Sprintf(`targets:
  - {name: echo-cut, url: %q, api_key_env: HEADROOM_TEST_API_KEY}
  - name: headers
    url: %q
    http_client_config: {http_headers: {X-Api-Key: {secrets: [%s]}}}
  - name: redirect
    url: %q
    http_client_config: {tls_config: {insecure_skip_verify: true}, authorization: {credentials: %s}}
  - {name: key-model, url: %q, api_key_env: HEADROOM_TEST_API_KEY}
  - {name: v1, url: %q}
discovery:
  - file_sd_configs: [{files: [sd.json]}]
  - http_sd_configs: [{url: %q}]
max_in_flight: 8
probe_budget: 0.5
power: {source: none}
calibration: {enabled: false}
scenarios: [{name: s, input_tokens: 512, output_tokens: 16, interval: 1s, timeout: 5s}]
use_cases: [{name: u, scenario: s, ttft_max: 1s}]
`, echoCut.URL, headers.URL, hardHeader, redirect.URL, hardKey, keyModel.URL, v1.URL+"/v1", endless.URL+"/sd"))
	base, logs := startDaemon(t, file)
	probes := func(target, result string) float64 {
		return scrape(t, base)[fmt.Sprintf("headroom_probes_total{result=%s,scenario=s,target=%s}", result, target)]
	}
	logged := func(want ...string) func() bool {
		return func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				all := true
				for _, w := range want {
					all = all && strings.Contains(l, w)
				}
				if all {
					return true
				}
			}
			return false
		}
	}
	daemon := []struct {
		name string
		done func() bool // the case's outcome has come
	}{
		{"3: an echo padded to put the cut inside the key", func() bool {
			return probes("echo-cut", "http_error") > 0 && logged("target=echo-cut", "HTTP 500: ppp", "<secret>")()
		}},
		{"4: an http_headers secret echoed in a 500", func() bool {
			return probes("headers", "http_error") > 0 && logged("target=headers", "bad header X-Api-Key: <secret>")()
		}},
		{"5: an https target's 307 to another port", func() bool {
			return probes("redirect", "http_error") > 0 && logged("target=redirect", "redirect to another scheme, host or port refused")()
		}},
		{"9: the key as the model id", func() bool {
			return scrape(t, base)["headroom_target_info{engine=vllm,model=<secret>,pool=,target=key-model,url="+keyModel.URL+"}"] == 1
		}},
		{"also: a base URL ending in /v1, its 404 an http_error", func() bool {
			return probes("v1", "http_error") > 0 && logged("targets[4].url: "+v1.URL+"/v1 ends in /v1")()
		}},
		{"10, 11: a __url__ with a query, a name of 100,000 bytes", func() bool {
			return scrape(t, base)["headroom_targets{source=discovery[0],state=invalid}"] == 2 &&
				logged("a base URL takes no query or fragment")() && logged("a label value of at most 1024 bytes")()
		}},
		{"8: an http_sd answer that never ends", logged("http_sd answer over the limit of 16 MiB")},
	}
	for _, tc := range daemon {
		t.Run(tc.name, func(t *testing.T) { waitFor(t, tc.name, tc.done) })
	}
	if t.Failed() {
		t.Logf("daemon log:\n%s", logs)
	}
	if got := leaked.Load().(string); got != "" {
		t.Errorf("case 5: the other port got Authorization %q", got)
	}
	page := get(t, base+"/metrics")
	if strings.Contains(page, strings.Repeat("x", 1025)) {
		t.Error("case 11: a label of over 1024 bytes is on /metrics")
	}
	for _, path := range []string{"/metrics", "/status", "/api/v1/status", "/"} {
		noSecret(t, path, get(t, base+path))
	}
	noSecret(t, "the daemon's log", logs.String())

	// bench's cases: each an exit code and what it printed.
	benchCases := []struct {
		name    string
		args    func(t *testing.T) []string
		code    int
		printed []string
		within  time.Duration
		// script: the report written into the last argument's directory
		// must show the model id <script> escaped.
		script bool
	}{
		{"1: compare a report of 10^18 tokens in 5e-324 s", func(t *testing.T) []string {
			a := benchReport(t, filepath.Join(t.TempDir(), "a"), func(r map[string]any) {
				reportCell(r, 0)["duration_s"] = 5e-324
				reportCell(r, 0)["requests"].([]any)[0].(map[string]any)["output_tokens"] = 1e18
			})
			return []string{"bench", "compare", a, "../../bench/testdata/report.json", "--out", t.TempDir()}
		}, 1, []string{"cells[0].requests[0].output_tokens: 1e+18 is out of range"}, 5 * time.Second, false},
		{"1: resume a report whose rate cell is absurd", func(t *testing.T) []string {
			out := t.TempDir()
			benchReport(t, out, func(r map[string]any) {
				reportCell(r, 0)["mode"], reportCell(r, 0)["rate_rps"], reportCell(r, 0)["concurrency"] = "rate", 1e300, 0
			})
			return []string{"bench", "--url", "http://127.0.0.1:9", "--contexts", "1024", "--out", out}
		}, 1, []string{"cells[0].rate_rps: 1e+300 is out of range"}, 5 * time.Second, false},
		{"2: a server that stalls", func(t *testing.T) []string {
			return []string{"bench", "--url", serve(scaled(stall)).URL, "--contexts", "1024", "--concurrency", "1", "--output-tokens", "16", "--out", t.TempDir()}
		}, 1, []string{"the server stalled"}, 2*time.Second + 10*time.Second, false},
		{"2: a server that drips a byte a second", func(t *testing.T) []string {
			return []string{"bench", "--url", serve(scaled(drip)).URL, "--contexts", "1024", "--concurrency", "1", "--output-tokens", "16", "--out", t.TempDir()}
		}, 1, []string{"the server stalled"}, 2*time.Second + 10*time.Second, false},
		{"2: a server that streams for ever", func(t *testing.T) []string {
			srv := serve(scaled(fakeServer(forever).ServeHTTP))
			return []string{"bench", "--url", srv.URL, "--model", "m", "--contexts", "1024", "--concurrency", "1", "--output-tokens", "16", "--out", t.TempDir()}
		}, 1, []string{"the server stalled", "a warm-up request of cell closed ctx=1024 out=16 n=1 gave no answer within its deadline of 1.6"}, 2*time.Second + 10*time.Second, false},
		{"6, 9: a model id of <script> and the key as the model id", func(t *testing.T) []string {
			out := t.TempDir()
			srv := serve(withPath(fakeServer(stream(16, 1024, 16)), "/v1/models", models("<script>alert(1)</script>")))
			key := serve(withPath(fakeServer(stream(16, 1024, 16)), "/v1/models", models("")))
			code, printed := capture(t, func() int {
				return run([]string{"bench", "--url", key.URL, "--api-key-env", "HEADROOM_TEST_API_KEY", "--contexts", "1024", "--concurrency", "1",
					"--output-tokens", "16", "--warmup", "0", "--engine", "none", "--out", filepath.Join(out, "key")})
			})
			if code != 0 {
				t.Errorf("bench with the key as the model id exited %d:\n%s", code, printed)
			}
			noSecret(t, "bench's output", printed)
			for _, f := range []string{"report.md", "report.json", "report.html", "report.csv"} {
				b, _ := os.ReadFile(filepath.Join(out, "key", f))
				noSecret(t, f, string(b))
			}
			return []string{"bench", "--url", srv.URL, "--contexts", "1024", "--concurrency", "1", "--output-tokens", "16", "--warmup", "0",
				"--engine", "none", "--out", filepath.Join(out, "script")}
		}, 0, nil, time.Minute, true},
		{"15: a capacity_seed at concurrency 2^62", func(t *testing.T) []string {
			seed := benchReport(t, t.TempDir(), func(r map[string]any) { reportCell(r, 1)["concurrency"] = 1 << 62 })
			return []string{"check-config", writeConfig(t, "", fmt.Sprintf("targets: [{name: a, url: 'http://h', capacity_seed: %q}]\n", seed))}
		}, 1, []string{"targets[0].capacity_seed: bench report", "cells[1].concurrency: 4.611686018427388e+18 is out of range [1, 65536]"}, 5 * time.Second, false},
		{"also: a base URL with a query", func(t *testing.T) []string {
			return []string{"check-config", writeConfig(t, "", "targets: [{name: a, url: 'http://h/api?x=1'}]\n")}
		}, 1, []string{"targets[0].url: a base URL takes no query or fragment"}, 5 * time.Second, false},
	}
	for _, tc := range benchCases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args(t)
			began := time.Now()
			code, printed := capture(t, func() int { return run(args) })
			took := time.Since(began)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, printed)
			}
			if took > tc.within {
				t.Errorf("took %s, want at most %s", took.Round(time.Millisecond), tc.within)
			}
			for _, want := range tc.printed {
				if !strings.Contains(printed, want) {
					t.Errorf("printed no %q:\n%s", want, printed)
				}
			}
			noSecret(t, "the output", printed)
			if tc.script {
				out := args[len(args)-1]
				md, err := os.ReadFile(filepath.Join(out, "report.md"))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(md), "<script") || !strings.Contains(string(md), "&lt;script&gt;") {
					t.Errorf("case 6: report.md does not escape the model id:\n%.300s", md)
				}
			}
		})
	}

	t.Run("12: an invalid file_sd file in the directory the daemon logs into", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "targets.json"), []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
		log, err := os.Create(filepath.Join(dir, "headroom.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		file := writeConfig(t, t.TempDir(), fmt.Sprintf("discovery:\n  - file_sd_configs: [{files: [%q]}]\npower: {source: none}\n", filepath.Join(dir, "*.json")))
		serveWith(t, slog.New(slog.NewTextHandler(log, nil)), file, false)
		time.Sleep(3 * time.Second) // the daemon's start logs lines after discovery's first error
		b, _ := os.ReadFile(log.Name())
		if n := strings.Count(string(b), "Error reading file"); n < 1 || n > 2 {
			t.Errorf("the file's error was logged %d times", n)
		}
	})

	t.Run("13: a cross-site POST /-/reload", func(t *testing.T) {
		file := writeConfig(t, "", "power: {source: none}\n")
		for _, tc := range []struct {
			lifecycle bool
			header    map[string]string
			want      int
		}{
			{false, map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, http.StatusForbidden},
			{false, nil, http.StatusForbidden},
			{true, map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
			{true, map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, http.StatusForbidden},
			{true, nil, http.StatusOK},
		} {
			base := serveWith(t, slog.New(slog.DiscardHandler), file, tc.lifecycle)
			req, _ := http.NewRequest(http.MethodPost, base+"/-/reload", strings.NewReader("x"))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("lifecycle %v, headers %v: %d, want %d", tc.lifecycle, tc.header, resp.StatusCode, tc.want)
			}
		}
	})

	t.Run("14: the landing page's Documentation link", func(t *testing.T) {
		page := get(t, base+"/")
		if strings.Contains(page, `href="/https:`) || !strings.Contains(page, `href="https://github.com/headroom-dev/headroom/tree/main/docs"`) {
			t.Errorf("the landing page's documentation link is not absolute:\n%s", page)
		}
	})
}

// serveWith runs a daemon of cfgFile logging to logger, /-/reload enabled
// by lifecycle, until the test ends; it returns its base URL.
func serveWith(t *testing.T, logger *slog.Logger, cfgFile string, lifecycle bool) string {
	t.Helper()
	d, err := newDaemon(logger, fleet.Shard{}, func() (*config.Config, error) { return config.Load(cfgFile) })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan int)
	go func() {
		done <- d.serve(ctx, &webFlags{listen: []string{"127.0.0.1:0"}, lifecycle: lifecycle}, func(a []net.Addr) { addr <- a[0] })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + (<-addr).String()
}
