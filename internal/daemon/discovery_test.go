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
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/sim"
)

// discoveryConfig is a config whose only targets come from one discovery
// entry, probed with one short scenario at the shipped interval.
func discoveryConfig(entry string) string {
	return "discovery:\n" + entry + `scenarios:
  - {name: short, input_tokens: 512, output_tokens: 16}
use_cases:
  - {name: chat, scenario: short, ttft_max: 1s}
`
}

type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// sdList is an http_sd endpoint whose list a test changes.
type sdList struct {
	mu     sync.Mutex
	groups []sdGroup
}

func (l *sdList) set(gs []sdGroup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.groups = gs
}

func (l *sdList) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(l.groups)
}

// targetInfo lists the targets on the daemon's page with their pool and URL.
func (r *runningDaemon) targetInfo() map[string]string {
	out := map[string]string{}
	for k := range r.scrape() {
		if !strings.HasPrefix(k, "headroom_target_info{") {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(k, "headroom_target_info{"), "}"), ",") {
			name, value, _ := strings.Cut(kv, "=")
			labels[name] = value
		}
		out[labels["target"]] = labels["pool"] + " " + labels["url"]
	}
	return out
}

// seriesOf counts the series on the daemon's page that name a target.
func (r *runningDaemon) seriesOf(target string) int {
	n := 0
	for k := range r.scrape() {
		if strings.Contains(k, "target="+target+",") || strings.Contains(k, "target="+target+"}") {
			n++
		}
	}
	return n
}

// Targets follow discovery: they come, leave (with their series), move
// pool and are probed with the template's scenarios only; one that
// relabeling cannot make valid is counted and logged, not probed. http_sd
// polls (every 5 s here), and discovery's manager sends its changes every
// 5 s: each step is waited for 30 s.
func TestHTTPSDTargetsFollow(t *testing.T) {
	t.Parallel() // seconds to a minute each under -race: two at a time on two cores
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		simURL := w.tinySim("sim", 20)
		addr := strings.TrimPrefix(simURL, "http://") + ":80"
		list := &sdList{}
		group := func(name, pool string) sdGroup {
			return sdGroup{Targets: []string{addr}, Labels: map[string]string{"name": name, "__meta_pool": pool}}
		}
		list.set([]sdGroup{group("a", "p1"), group("b", "p1")})
		sdURL := w.serve("sd", list)
		// The template probes one of two scenarios.
		entry := fmt.Sprintf(`  - http_sd_configs: [{url: %s/targets, refresh_interval: 5s}]
    relabel_configs:
      - {source_labels: [name], target_label: target}
      - {source_labels: [__meta_pool], target_label: pool}
    target: {engine: vllm, scenarios: [short]}
`, sdURL)
		cfg := strings.Replace(discoveryConfig(entry), "use_cases:\n", "  - {name: long, input_tokens: 2048, output_tokens: 16}\nuse_cases:\n  - {name: doc, scenario: long, ttft_max: 1s}\n", 1)
		d := w.startDaemon(writeConfig(t, "", cfg))
		url := "http://" + addr
		waitFor(t, "targets a and b", 30*time.Second, func() bool {
			ti := d.targetInfo()
			return ti["a"] == "p1 "+url && ti["b"] == "p1 "+url
		})
		waitFor(t, "probe of a", 30*time.Second, func() bool {
			return d.scrape()[`headroom_probes_total{result=success,scenario=short,target=a}`] >= 1
		})
		waitFor(t, "capacity series of a", 30*time.Second, func() bool {
			_, ok := d.scrape()["headroom_capacity_samples{target=a,use_case=chat}"]
			return ok
		})
		for k := range d.scrape() {
			if strings.Contains(k, "target=") && (strings.Contains(k, "scenario=long") || strings.Contains(k, "use_case=doc")) {
				t.Errorf("%s: the target is not probed with scenario long", k)
			}
		}

		// a leaves, b moves pool, c joins.
		list.set([]sdGroup{group("b", "p2"), group("c", "p2")})
		waitFor(t, "a gone, b in p2, c probed", 30*time.Second, func() bool {
			ti := d.targetInfo()
			_, hasA := ti["a"]
			return !hasA && ti["b"] == "p2 "+url && d.scrape()[`headroom_probes_total{result=success,scenario=short,target=c}`] >= 1
		})
		if n := d.seriesOf("a"); n != 0 {
			t.Errorf("%d series of target a after it left, want none", n)
		}
		if !d.logs.line(`msg="targets changed" added=1 removed=1 probed=2`) {
			t.Errorf("no log line says a left and c came:\n%s", d.logs)
		}
		if page := d.get("/"); !strings.Contains(page, "b (pool p2): "+url) || strings.Contains(page, "debug/pprof") {
			t.Errorf("the landing page does not list b in its pool, or links a profiler it does not serve:\n%s", page)
		}
		if got := d.scrape()[`headroom_targets{source=discovery[0],state=probed}`]; got != 2 {
			t.Errorf("headroom_targets probed = %v, want 2", got)
		}

		// A target relabeling cannot make valid is counted and logged, not probed.
		list.set([]sdGroup{{Targets: []string{addr}, Labels: map[string]string{"name": "b c"}}})
		waitFor(t, "the invalid target counted", 30*time.Second, func() bool {
			return d.scrape()[`headroom_targets{source=discovery[0],state=invalid}`] == 1
		})
		if !d.logs.line(`target \"b c\".name: must match`) {
			t.Errorf("no log line names the invalid target:\n%s", d.logs)
		}
		if ti := d.targetInfo(); len(ti) != 0 {
			t.Errorf("targets left: %v", ti)
		}
		list.set(nil)
		waitFor(t, "no target", 30*time.Second, func() bool {
			return d.scrape()[`headroom_targets{source=discovery[0],state=invalid}`] == 0
		})
	})
}

// fleetList is an http_sd list of the first n servers of a sim.Fleet at url.
func fleetList(url string, n int) []sdGroup {
	addr := strings.TrimPrefix(url, "http://") + ":80"
	var gs []sdGroup
	for i := range n {
		gs = append(gs, sdGroup{Targets: []string{addr}, Labels: map[string]string{"target": fmt.Sprintf("s%d", i), "__url__": fmt.Sprintf("%s/s%d", url, i)}})
	}
	return gs
}

func TestTwoShardsProbeEveryTargetOnce(t *testing.T) {
	t.Parallel() // seconds to a minute each under -race: two at a time on two cores
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		fl := sim.NewFleet(w.ctx, sim.Tiny, 20, "vllm", 110)
		w.onStop(fl.Wait)
		url := w.serve("fleet", fl)
		list := &sdList{}
		list.set(fleetList(url, 100))
		sdURL := w.serve("sd", list)
		entry := fmt.Sprintf("  - http_sd_configs: [{url: %s/targets, refresh_interval: 5s}]\n    target: {engine: vllm}\n", sdURL)
		// A hundred targets on one simulated engine are one server to it: their
		// calibration bursts would queue behind one another for minutes.
		file := writeConfig(t, "", discoveryConfig(entry)+"calibration: {enabled: false}\n")
		var replicas [2]*runningDaemon
		for i := range replicas {
			replicas[i] = w.start(func() (*config.Config, error) { return config.Load(file) }, fleet.Shard{Index: i, Count: 2}, true)
		}
		owned := func() [2]map[string]bool {
			var out [2]map[string]bool
			for i, r := range replicas {
				out[i] = map[string]bool{}
				for name := range r.targetInfo() {
					out[i][name] = true
				}
			}
			return out
		}
		waitEvery(t, "100 targets split between the replicas", 30*time.Second, 5*time.Second, func() bool {
			o := owned()
			return len(o[0])+len(o[1]) == 100
		})
		before := owned()
		for i := range 100 {
			name := fmt.Sprintf("s%d", i)
			if before[0][name] == before[1][name] {
				t.Errorf("%s is probed by %d replicas", name, map[bool]int{true: 2, false: 0}[before[0][name]])
			}
		}
		for i, o := range before {
			// Binomial(100, 1/2): within 4 standard deviations.
			if len(o) < 30 || len(o) > 70 {
				t.Errorf("replica %d probes %d of 100 targets, want about half", i, len(o))
			}
			if got := replicas[i].scrape()[`headroom_targets{source=discovery[0],state=other_shard}`]; int(got) != 100-len(o) {
				t.Errorf("replica %d: other_shard = %v, want %d", i, got, 100-len(o))
			}
		}
		// Every target gets its first probe, from its one replica: the probes
		// the server saw are the probes that replica counted.
		counted := func(page map[string]float64, name string) (n float64) {
			for _, result := range []string{"success", "timeout", "http_error", "stream_error", "connect_error"} {
				n += page[fmt.Sprintf("headroom_probes_total{result=%s,scenario=short,target=%s}", result, name)]
			}
			return n
		}
		waitEvery(t, "probe of every target, by one replica", 2*time.Minute, 5*time.Second, func() bool {
			pages := [2]map[string]float64{replicas[0].scrape(), replicas[1].scrape()}
			for i := range 100 {
				name := fmt.Sprintf("s%d", i)
				a, b := counted(pages[0], name), counted(pages[1], name)
				if got := fl.Requests(name); got == 0 || float64(got) != a+b || (a > 0 && b > 0) {
					return false
				}
			}
			return true
		})

		// Ten targets join: none of the hundred changes replica.
		list.set(fleetList(url, 110))
		waitEvery(t, "110 targets split", 30*time.Second, 5*time.Second, func() bool {
			o := owned()
			return len(o[0])+len(o[1]) == 110
		})
		after := owned()
		for i := range 2 {
			for name := range before[i] {
				if !after[i][name] {
					t.Errorf("%s moved off replica %d when 10 targets joined", name, i)
				}
			}
		}
	})
}
