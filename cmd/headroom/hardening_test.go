package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/scripted"
)

// hardKey is the hardening cases' secret: it must appear nowhere, nor any
// of its prefixes of 6 characters or more.
const hardKey = "Zq9-hardening-key-77e1"

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
	if leak := scripted.Leak(text, hardKey); leak != "" {
		t.Errorf("%s carries %q of a secret", where, leak)
	}
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
			fmt.Fprint(w, scripted.MetricsPage+"headroom_sim_info{time_scale=\"20\"} 1\n")
			return
		}
		h(w, r)
	})
}

// TestHardening runs bench's and check-config's cases of issue 37 against
// loopback servers (the daemon's are internal/daemon's TestHardening); every
// output and report of every case is searched for the secrets.
func TestHardening(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", hardKey)
	serve := func(h http.Handler) *httptest.Server {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}

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
			return []string{"bench", "--url", serve(scaled(scripted.Stall)).URL, "--contexts", "1024", "--concurrency", "1", "--output-tokens", "16", "--out", t.TempDir()}
		}, 1, []string{"the server stalled"}, 2*time.Second + 10*time.Second, false},
		{"2: a server that drips a byte a second", func(t *testing.T) []string {
			return []string{"bench", "--url", serve(scaled(drip)).URL, "--contexts", "1024", "--concurrency", "1", "--output-tokens", "16", "--out", t.TempDir()}
		}, 1, []string{"the server stalled"}, 2*time.Second + 10*time.Second, false},
		{"2: a server that streams for ever", func(t *testing.T) []string {
			srv := serve(scaled(scripted.Fake(forever).ServeHTTP))
			return []string{"bench", "--url", srv.URL, "--model", "m", "--contexts", "1024", "--concurrency", "1", "--output-tokens", "16", "--out", t.TempDir()}
		}, 1, []string{"the server stalled", "a warm-up request of cell closed ctx=1024 out=16 n=1 gave no answer within its deadline of 1.6"}, 2*time.Second + 10*time.Second, false},
		{"6, 9: a model id of <script> and the key as the model id", func(t *testing.T) []string {
			out := t.TempDir()
			srv := serve(scripted.WithPath(scripted.Fake(scripted.Fixed(16, 1024, 16)), "/v1/models", scripted.Models("<script>alert(1)</script>")))
			key := serve(scripted.WithPath(scripted.Fake(scripted.Fixed(16, 1024, 16)), "/v1/models", scripted.Models("")))
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
}
