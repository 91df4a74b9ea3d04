package daemon_test

import (
	"math"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
)

// TestFleetHeapFlat runs the daemon with 1,000 discovered targets for 24
// hours of virtual time and reads its live heap at each hour (after a
// collection): every store is bounded in time and size, so the heap at
// hour 24 is within 10% of hour 6, once the 6-hour curve window has
// filled. An engine series that gained a point every 30 s filled its
// 4,096 points after 34 hours: 3.1 GB at 1,000 targets.
//
// Reduced, so that it takes minutes on two cores, not the best part of an
// hour: one scenario of 64 prompt and 8 output tokens, not the five
// default ones, against servers that answer at once (scripted.Fake, no
// tokenizer), and engine_scrape_interval 1m, not 5s. The stores' bounds
// do not depend on the prompts' length, and an engine reading keeps no
// state past the next; the shipped default (5 s) made the engine reads
// 60% of the run's CPU, and a virtual hour took 100 s. Under -race (ten
// times slower), and under a deadline of less than 20 minutes, it is
// skipped; .ci/run runs it without -race, with -timeout 30m.
func TestFleetHeapFlat(t *testing.T) {
	if raceEnabled {
		t.Skip("24 virtual hours of 1,000 targets take over an hour under -race; .ci/run runs this test without it")
	}
	// About 7 minutes here: under go test's default 10-minute deadline
	// the package's other tests and a loaded machine would run it out.
	if d, ok := t.Deadline(); ok && time.Until(d) < 20*time.Minute {
		t.Skip("takes about 7 minutes on two cores: run it with -timeout 30m, as .ci/run does")
	}
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.serve("fleet", newFakeFleet("http://fleet", 1000))
		file := writeConfig(t, "", `discovery:
  - http_sd_configs: [{url: "http://fleet/targets"}]
power: {source: none}
engine_scrape_interval: 1m
scenarios: [{name: s, input_tokens: 64, output_tokens: 8}]
use_cases: [{name: u, scenario: s, ttft_max: 1s}]
`)
		// The test keeps the log's last MiB: all of it would grow the heap it reads.
		d := w.startLogging(func() (*config.Config, error) { return config.Load(file) }, fleet.Shard{}, true, &syncWriter{max: 1 << 20})
		start := time.Now()
		heap := make([]float64, 25) // MB, by hour
		for h := 1; h <= 24; h++ {
			heap[h] = liveHeap(start.Add(time.Duration(h) * time.Hour))
			t.Logf("hour %2d: live heap %.1f MB", h, heap[h])
		}
		if r := heap[24] / heap[6]; r < 0.9 || r > 1.1 {
			t.Errorf("live heap %.1f MB at hour 24, %.1f MB at hour 6: %+.0f%%, want within 10%%", heap[24], heap[6], 100*(r-1))
		}
		// What the run was: 1,000 targets probed, each many times.
		m := d.scrape()
		if n := m[`headroom_targets{source=discovery[0],state=probed}`]; n != 1000 {
			t.Errorf("%v targets probed, want 1000", n)
		}
		if n := m[`headroom_probes_total{result=success,scenario=s,target=s999}`]; n < 100 {
			t.Errorf("s999 probed %v times in 24 hours, want at least 100", n)
		}
	})
}

// liveHeap is the heap that outlives the work in flight, in MB: the least
// of six readings in the minute up to at, each after two collections (the
// first moves sync.Pools' buffers to their victim caches, the second frees
// them). A reading taken as a probe or an engine read is in flight counts
// its connection's buffers; what every reading holds is what stays.
func liveHeap(at time.Time) float64 {
	least := math.Inf(1)
	for i := 5; i >= 0; i-- {
		time.Sleep(time.Until(at.Add(-time.Duration(i) * 10 * time.Second)))
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		least = min(least, float64(ms.HeapAlloc)/1e6)
	}
	return least
}
