package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/scripted"
)

// fakeFleet is n servers behind one host, /s0/ to /s(n-1)/, each a
// scripted.Fake, listed for http_sd at /targets as `headroom sim serve
// --fleet` lists its own (about 10 MiB for 100,000). It counts the
// requests each server was sent.
type fakeFleet struct {
	list   []byte
	server http.Handler

	mu   sync.Mutex
	sent map[string]int
}

func newFakeFleet(url string, n int) *fakeFleet {
	groups := make([]sdGroup, n)
	for i := range groups {
		name := fmt.Sprintf("s%d", i)
		groups[i] = sdGroup{Targets: []string{strings.TrimPrefix(url, "http://") + ":80"}, Labels: map[string]string{"target": name, "__url__": url + "/" + name}}
	}
	list, _ := json.Marshal(groups)
	return &fakeFleet{list: list, server: scripted.Fake(scripted.Fixed(8, 64, 8)), sent: map[string]int{}}
}

func (f *fakeFleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/targets" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(f.list)
		return
	}
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	f.mu.Lock()
	f.sent[name]++
	f.mu.Unlock()
	r.URL.Path = "/" + rest
	f.server.ServeHTTP(w, r)
}

// servers is how many servers were sent a request.
func (f *fakeFleet) servers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

// An http_sd list of 100,000 targets (read once: it does not change, and
// each read decodes 10 MiB and relabels 100,000 targets): the daemon probes
// the default max_targets of them (the first 1,000 in the list's order),
// counts the other 99,000 as over the limit and says so in one log line,
// and answers /metrics. Before max_targets, it probed them all, and a
// replica passed 4.6 GB in 20 s and stopped answering. Under -race the list
// has 2,000 targets: the same paths, where 100,000 took 297 s of a CI run;
// .ci/run runs the whole list without -race.
func TestHundredThousandTargets(t *testing.T) {
	t.Parallel() // seconds to a minute each under -race: two at a time on two cores
	n := 100_000
	if raceEnabled {
		n = 2 * config.DefaultMaxTargets
	}
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		fl := newFakeFleet("http://fleet", n)
		w.serve("fleet", fl)
		d := w.startDaemon(writeConfig(t, "", `discovery:
  - http_sd_configs: [{url: "http://fleet/targets", refresh_interval: 10m}]
power: {source: none}
calibration: {enabled: false}
scenarios: [{name: s, input_tokens: 64, output_tokens: 8, interval: 1m}]
use_cases: [{name: u, scenario: s, ttft_max: 1s}]
`))
		waitEvery(t, "probe of 1,000 targets", 5*time.Minute, 10*time.Second, func() bool { return fl.servers() >= config.DefaultMaxTargets })
		m := d.scrape()
		if probed, over := m[`headroom_targets{source=discovery[0],state=probed}`], m[`headroom_targets{source=discovery[0],state=over_limit}`]; probed != config.DefaultMaxTargets || over != float64(n-config.DefaultMaxTargets) {
			t.Errorf("%v targets probed and %v over the limit, want %d and %d", probed, over, config.DefaultMaxTargets, n-config.DefaultMaxTargets)
		}
		// A minute more: every probed target has been probed again, no other ever.
		time.Sleep(time.Minute)
		fl.mu.Lock()
		for name := range fl.sent {
			var i int
			if _, err := fmt.Sscanf(name, "s%d", &i); err != nil || i >= config.DefaultMaxTargets {
				t.Errorf("%s, not among the first 1,000, was sent requests", name)
			}
		}
		fl.mu.Unlock()
		if got := fl.servers(); got != config.DefaultMaxTargets {
			t.Errorf("%d servers sent requests, want %d", got, config.DefaultMaxTargets)
		}
		left := fmt.Sprint(n - config.DefaultMaxTargets)
		if k := strings.Count(d.logs.String(), "targets over the limit not probed"); k != 1 || !d.logs.line("limit=max_targets", "max_targets=1000", "not_probed="+left) {
			t.Errorf("%d log lines on the limit, want one saying %s were left out", k, left)
		}
		d.get("/-/healthy")
		if page := d.get("/metrics"); !strings.Contains(page, `headroom_probes_total{result="success",scenario="s",target="s999"}`) {
			t.Error("no probe of s999 on /metrics")
		}
	})
}
