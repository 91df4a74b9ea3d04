package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/contract"
	"github.com/headroom-dev/headroom/internal/exposition"
	"github.com/headroom-dev/headroom/sim"
)

// lines is a log that tells, by channel, when a line holding a text has
// been written: a test waits for the daemon's news, not on the clock.
type lines struct {
	mu    sync.Mutex
	b     bytes.Buffer
	waits map[string]chan struct{}
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for text, c := range l.waits {
		if bytes.Contains(p, []byte(text)) {
			close(c)
			delete(l.waits, text)
		}
	}
	return l.b.Write(p)
}

// next returns a channel closed at the next line holding text.
func (l *lines) next(text string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := make(chan struct{})
	l.waits[text] = c
	return c
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeSmoke is the daemon's one wall-clock test (internal/daemon's
// run in virtual time): serve's flags, a real listener, a real simulator
// on loopback, a probe, /metrics held to the contract, a reload by POST and
// one by SIGHUP, and a clean exit. It waits for log lines, each for at most
// a minute: the bound is for a broken build, not a timing.
func TestServeSmoke(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", "sk-smoke-secret-31")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := sim.NewServer(sim.Tiny, 20, "vllm")
	go s.Run(ctx)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	file := writeConfig(t, "", fmt.Sprintf("targets: [{name: sim, url: %q, api_key_env: HEADROOM_TEST_API_KEY}]\npower: {source: none}\n"+
		"scenarios: [{name: s, input_tokens: 512, output_tokens: 16, interval: 1s}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n", srv.URL))
	logs := &lines{waits: map[string]chan struct{}{}}
	probed := logs.next(`msg=probe target=sim`)
	c := &serveCmd{configFile: file, web: &webFlags{listen: []string{"127.0.0.1:0"}, lifecycle: true}, shardIndex: "0", shardCount: 1}
	addr := make(chan net.Addr, 1)
	done := make(chan int, 1)
	go func() {
		done <- c.serve(ctx, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), func(a []net.Addr) { addr <- a[0] })
	}()
	base := "http://" + (<-addr).String()
	wait := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case code := <-done:
			t.Fatalf("serve exited %d before %s:\n%s", code, what, logs)
		case <-time.After(time.Minute):
			t.Fatalf("no %s logged within a minute:\n%s", what, logs)
		}
	}
	wait("probe", probed)

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkContract(t, page)
	if !bytes.Contains(page, []byte(`headroom_config_last_reload_successful 1`)) {
		t.Error("no successful configuration on /metrics")
	}

	reloaded := logs.next(`msg="reloaded config"`)
	if resp, err := http.Post(base+"/-/reload", "", nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /-/reload: %v %v", resp, err)
	}
	wait("reload by POST", reloaded)
	reloaded = logs.next(`msg="reloaded config"`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("reload by SIGHUP", reloaded)

	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d", code)
	}
	if strings.Contains(logs.String(), "sk-smoke-secret-31") {
		t.Error("the API key is in the log")
	}
}

// checkContract holds every headroom_ family on a page to the metric
// contract.
func checkContract(t *testing.T, page []byte) {
	t.Helper()
	mfs, err := exposition.Families(bytes.NewReader(page), 64<<20, func(name string) bool { return strings.HasPrefix(name, "headroom_") })
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) == 0 {
		t.Error("no headroom_ family on the page")
	}
	if err := contract.Check(mfs); err != nil {
		t.Error(err)
	}
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

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("targets:\n  - name: a\n    url: http://h\n  - name: b\n    url: ftp://h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"check-config", bad}); code != 1 {
		t.Errorf("check-config on a bad file exited %d, want 1", code)
	}
	// A FIFO named as a seed is refused at once; opening it would block
	// check-config until some writer came.
	fifo := filepath.Join(dir, "seed.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	seeded := filepath.Join(dir, "seeded.yml")
	if err := os.WriteFile(seeded, []byte("targets:\n  - {name: a, url: 'http://h', capacity_seed: seed.json}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"check-config", seeded}); code != 1 {
		t.Errorf("check-config with a FIFO as capacity_seed exited %d, want 1", code)
	}
	t.Setenv("VLLM_A_KEY", "sk-a") // good.yml's target reads its key from there
	if code := run([]string{"check-config", "../../config/testdata/good.yml"}); code != 0 {
		t.Errorf("check-config on a good file exited %d, want 0", code)
	}
}
