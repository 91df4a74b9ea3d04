package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/headroom-dev/headroom/capacity"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
)

// With its port taken, serve exits non-zero at once, before probing: it
// used to log the bind error and run on.
func TestServePortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := writeConfig(t, "", "targets: [{name: a, url: 'http://127.0.0.1:1'}]\npower: {source: none}\n")
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		done <- run([]string{"serve", "--config.file", file, "--web.listen-address", l.Addr().String()})
	}()
	select {
	case code := <-done:
		t.Logf("exited %d after %s", code, time.Since(start))
		if code == 0 {
			t.Error("serve with its port taken exited 0")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve with its port taken still runs after 10 s")
	}
}

// Reloads from /-/reload and SIGHUP are applied one at a time, in order: a
// slow reload cannot finish after, and overwrite, a newer one.
func TestReloadsAreSerialised(t *testing.T) {
	file := writeConfig(t, "", "targets: []\npower: {source: none}\n")
	var inLoad, most, loads atomic.Int32
	load := func() (*config.Config, error) {
		n := inLoad.Add(1)
		defer inLoad.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		loads.Add(1)
		time.Sleep(20 * time.Millisecond) // a slow file system
		return config.Load(file)
	}
	d, err := newDaemon(slog.New(slog.DiscardHandler), fleet.Shard{}, load)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	addr := make(chan net.Addr, 1)
	done := make(chan int)
	go func() {
		done <- d.serve(ctx, &webFlags{listen: []string{"127.0.0.1:0"}, lifecycle: true}, func(a []net.Addr) { addr <- a[0] })
	}()
	base := "http://" + (<-addr).String()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			resp, err := http.Post(base+"/-/reload", "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("reload: HTTP %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d", code)
	}
	if loads.Load() != 11 || most.Load() != 1 {
		t.Errorf("%d loads, at most %d at once; want 11 (start + 10 reloads), one at a time", loads.Load(), most.Load())
	}
}

// A reload that restarts the loops keeps the budget's debt: a 300 ms probe at
// a 10% budget owes 3 s of quiet, and a reload that changes the scenarios
// does not probe before then (it probed every scenario at once before).
func TestReloadKeepsProbeBudget(t *testing.T) {
	var probes atomic.Int32
	srv := httptest.NewServer(fakeServer(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"max_tokens":1,`)) { // not a sizing count
			probes.Add(1)
			time.Sleep(300 * time.Millisecond)
		}
		stream(8, 512, 8)(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	write := func(scenario string) string {
		return writeConfig(t, dir, fmt.Sprintf("targets: [{name: a, url: %q, engine: none}]\nprobe_budget: 0.1\npower: {source: none}\n"+
			"scenarios: [{name: %s, input_tokens: 512, output_tokens: 8, interval: 1h}]\nuse_cases: [{name: u, scenario: %s, ttft_max: 1s}]\n", srv.URL, scenario, scenario))
	}
	file := write("one")
	base, _ := startDaemon(t, file)
	waitFor(t, "the first probe", func() bool {
		return scrape(t, base)["headroom_probes_total{result=success,scenario=one,target=a}"] == 1
	})
	write("two")
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %v %v", resp, err)
	}
	time.Sleep(time.Second)
	if n := probes.Load(); n != 1 {
		t.Errorf("%d probes within 1 s of the reload, want only the first: the budget owes 3 s", n)
	}
}

// A rotated key file is read again on reload; before, the old key was sent
// until a restart.
func TestReloadRotatesKey(t *testing.T) {
	var key atomic.Value
	key.Store("Bearer sk-one")
	srv := httptest.NewServer(fakeServer(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != key.Load() {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		stream(8, 512, 8)(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("sk-one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeConfig(t, dir, fmt.Sprintf("targets: [{name: a, url: %q, api_key_file: key}]\nprobe_budget: 0.5\npower: {source: none}\n"+
		"scenarios: [{name: s, input_tokens: 512, output_tokens: 8, interval: 1s}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n", srv.URL))
	base, logs := startDaemon(t, file)
	ok := func(result string) float64 {
		return scrape(t, base)["headroom_probes_total{result="+result+",scenario=s,target=a}"]
	}
	waitFor(t, "a probe with the first key", func() bool { return ok("success") >= 1 })
	key.Store("Bearer sk-two") // the server rotates
	waitFor(t, "a refused probe", func() bool { return ok("http_error") >= 1 })
	if err := os.WriteFile(keyFile, []byte("sk-two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := ok("success")
	if resp, err := http.Post(base+"/-/reload", "", nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: %v %v", resp, err)
	}
	waitFor(t, "a probe with the rotated key", func() bool { return ok("success") > before })
	if strings.Contains(logs.String(), "sk-one") || strings.Contains(logs.String(), "sk-two") {
		t.Error("a key is in the log")
	}
}

// /api/v1/status says how far each use case is from an estimate: samples so
// far and needed, and when its scenario is next probed.
func TestStatusShowsProgress(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", "sk-test")
	srv := startTinySim(t, 1000)
	file := writeConfig(t, "", testConfig(srv.URL, "s"))
	start := time.Now()
	base, _ := startDaemon(t, file)
	waitFor(t, "a probe", func() bool {
		return scrape(t, base)["headroom_probes_total{result=success,scenario=s,target=sim}"] >= 1
	})
	var status struct {
		Estimates []struct {
			UseCase       string `json:"use_case"`
			Samples       int    `json:"samples"`
			SamplesNeeded int    `json:"samples_needed"`
			NextProbe     string `json:"next_probe"`
		} `json:"estimates"`
	}
	resp, err := http.Get(base + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil {
		t.Fatal(err)
	}
	if len(status.Estimates) != 1 {
		t.Fatalf("%d estimates, want 1", len(status.Estimates))
	}
	e := status.Estimates[0]
	next, err := time.Parse(time.RFC3339, e.NextProbe)
	if e.Samples < 1 || e.SamplesNeeded != capacity.MinSamples || err != nil || next.Before(start.Truncate(time.Second)) {
		t.Errorf("progress: %d samples of %d needed, next probe %q (%v); want at least 1 of %d and a time after the start", e.Samples, e.SamplesNeeded, e.NextProbe, err, capacity.MinSamples)
	}
}
