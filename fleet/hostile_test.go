package fleet

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/config"
)

// startFleet runs a fleet's discovery with logger until the test ends.
func startFleet(t *testing.T, logger *slog.Logger, cfg string) *Fleet {
	t.Helper()
	c, err := config.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(logger, prometheus.NewRegistry(), Shard{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run, err := f.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(run)
	t.Cleanup(func() { cancel(); wg.Wait() })
	if err := f.Discover(c); err != nil {
		t.Fatal(err)
	}
	return f
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An http_sd answer that never ends is cut at maxSDBody and the refresh
// fails saying so, instead of being read until memory runs out.
func TestHTTPSDBodyBounded(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(`[{"targets":["h:1"],"labels":{"x":"` + strings.Repeat("y", 64<<10) + `"}},`)
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	logs := &lockedBuffer{}
	startFleet(t, slog.New(slog.NewTextHandler(logs, nil)),
		fmt.Sprintf("discovery:\n  - http_sd_configs: [{url: %q, refresh_interval: 30s}]\n", srv.URL+"/sd"))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "http_sd answer over the limit of 16 MiB") {
		if time.Now().After(deadline) {
			t.Fatalf("no refresh error after %d bytes served; log:\n%.2000s", written.Load(), logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The server's writes run ahead of the reader by the sockets' buffers.
	if n := written.Load(); n > 48<<20 {
		t.Errorf("the server wrote %d MiB for a limit of 16", n>>20)
	}
}

// A daemon that logs into the directory of an invalid file_sd file logs
// the error once: each of its lines used to re-trigger the file's watch,
// and the next error line, about 21,000 a second.
func TestFileSDErrorLoggedIntoItsDirectoryOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "targets.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "headroom.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	logger := slog.New(slog.NewTextHandler(log, nil))
	startFleet(t, logger, fmt.Sprintf("discovery:\n  - file_sd_configs: [{files: [%q]}]\n", filepath.Join(dir, "*.json")))
	// The first error comes before the directory is watched (file_sd
	// watches at the end of its refresh); any line the daemon logs after
	// the watch starts the loop. Waited for, not slept for: on a loaded
	// machine the first refresh may come after a fixed sleep.
	path := filepath.Join(dir, "headroom.log")
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "Error reading file") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no error for the invalid file within 20 s; log:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // for the watch, set after the error line
	logger.Info("a probe's line")
	time.Sleep(2 * time.Second)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "Error reading file"); n < 1 || n > 2 {
		t.Errorf("the file's error was logged %d times by 2.5 s after it first was, want once", n)
	}
}
