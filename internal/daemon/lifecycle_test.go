package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/internal/scripted"
)

// Reloads from /-/reload (and SIGHUP, which calls Reload too) are applied
// one at a time, in order: a slow reload cannot finish after, and
// overwrite, a newer one.
func TestReloadsAreSerialised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
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
		d := w.start(load, fleet.Shard{}, true)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if code, body := d.reload(); code != http.StatusOK {
					t.Errorf("reload: HTTP %d %s", code, body)
				}
			})
		}
		wg.Wait()
		if loads.Load() != 11 || most.Load() != 1 {
			t.Errorf("%d loads, at most %d at once; want 11 (start + 10 reloads), one at a time", loads.Load(), most.Load())
		}
	})
}

// A reload that restarts the loops keeps the budget's debt: a 300 ms probe at
// a 10% budget owes 3 s of quiet, and a reload that changes the scenarios
// does not probe before then (it probed every scenario at once before).
func TestReloadKeepsProbeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var probes atomic.Int32
		url := w.serve("a", scripted.Fake(func(rw http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if !bytes.Contains(body, []byte(`"max_tokens":1,`)) { // not a sizing count
				probes.Add(1)
				time.Sleep(300 * time.Millisecond)
			}
			scripted.Fixed(8, 512, 8)(rw, r)
		}))
		dir := t.TempDir()
		write := func(scenario string) string {
			return writeConfig(t, dir, fmt.Sprintf("targets: [{name: a, url: %q, engine: none}]\nprobe_budget: 0.1\npower: {source: none}\n"+
				"scenarios: [{name: %s, input_tokens: 512, output_tokens: 8, interval: 1h}]\nuse_cases: [{name: u, scenario: %s, ttft_max: 1s}]\n", url, scenario, scenario))
		}
		d := w.startDaemon(write("one"))
		waitFor(t, "first probe", 5*time.Second, func() bool {
			return d.scrape()["headroom_probes_total{result=success,scenario=one,target=a}"] == 1
		})
		first := time.Now()
		write("two")
		if code, body := d.reload(); code != http.StatusOK {
			t.Fatalf("reload: %d %s", code, body)
		}
		time.Sleep(time.Second)
		if n := probes.Load(); n != 1 {
			t.Errorf("%d probes within 1 s of the reload, want only the first: the budget owes 3 s", n)
		}
		waitFor(t, "probe of the new scenario", 5*time.Second, func() bool { return probes.Load() == 2 })
		if gap := time.Since(first); gap < 2500*time.Millisecond {
			t.Errorf("the probe after the reload came %s after the first, want about 3 s (the budget's debt)", gap)
		}
	})
}

// A rotated key file is read again on reload; before, the old key was sent
// until a restart.
func TestReloadRotatesKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var key atomic.Value
		key.Store("Bearer sk-one")
		url := w.serve("a", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != key.Load() {
				http.Error(rw, "bad key", http.StatusUnauthorized)
				return
			}
			scripted.Fake(scripted.Fixed(8, 512, 8)).ServeHTTP(rw, r)
		}))
		dir := t.TempDir()
		keyFile := filepath.Join(dir, "key")
		if err := os.WriteFile(keyFile, []byte("sk-one\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		d := w.startDaemon(writeConfig(t, dir, fmt.Sprintf("targets: [{name: a, url: %q, api_key_file: key}]\nprobe_budget: 0.5\npower: {source: none}\n"+
			"scenarios: [{name: s, input_tokens: 512, output_tokens: 8, interval: 1s}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n", url)))
		ok := func(result string) float64 {
			return d.scrape()["headroom_probes_total{result="+result+",scenario=s,target=a}"]
		}
		waitFor(t, "probe with the first key", 5*time.Second, func() bool { return ok("success") >= 1 })
		key.Store("Bearer sk-two") // the server rotates
		waitFor(t, "refused probe", 5*time.Second, func() bool { return ok("http_error") >= 1 })
		if err := os.WriteFile(keyFile, []byte("sk-two\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		before := ok("success")
		if code, body := d.reload(); code != http.StatusOK {
			t.Fatalf("reload: %d %s", code, body)
		}
		waitFor(t, "probe with the rotated key", 5*time.Second, func() bool { return ok("success") > before })
		if strings.Contains(d.logs.String(), "sk-one") || strings.Contains(d.logs.String(), "sk-two") {
			t.Error("a key is in the log")
		}
	})
}

// /api/v1/status says how far each use case is from an estimate: samples so
// far and needed, and when its scenario is next probed.
func TestStatusShowsProgress(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", "sk-test")
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		url := w.tinySim("sim", 1000)
		start := time.Now()
		d := w.startDaemon(writeConfig(t, "", testConfig(url, "s")))
		waitFor(t, "probe", 5*time.Second, func() bool {
			return d.scrape()["headroom_probes_total{result=success,scenario=s,target=sim}"] >= 1
		})
		var status struct {
			Estimates []struct {
				UseCase       string `json:"use_case"`
				Samples       int    `json:"samples"`
				SamplesNeeded int    `json:"samples_needed"`
				NextProbe     string `json:"next_probe"`
			} `json:"estimates"`
		}
		if err := json.Unmarshal([]byte(d.get("/api/v1/status")), &status); err != nil {
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
	})
}
