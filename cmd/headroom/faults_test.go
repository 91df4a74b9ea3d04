package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/internal/scripted"
)

const faultKey = "sk-fault-secret-4242"

// A sweep in which every request failed (llama.cpp refusing 262K-token
// prompts with HTTP 400) exits non-zero, and its report says how it failed,
// never that a single request breaches.
func TestBenchEveryRequestFailed(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", faultKey)
	srv := httptest.NewServer(scripted.Fake(func(w http.ResponseWriter, r *http.Request) {
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
