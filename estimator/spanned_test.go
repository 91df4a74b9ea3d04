package estimator_test

import (
	"math"
	"testing"

	"github.com/headroom-dev/headroom/sim"
)

// TestQueuedLoneProbesAreNotIdle runs the shipped monitor and estimator for
// an hour of virtual time against the simulator of report 002, probing its
// 64K scenario every 40 s beside one production user of the same shape,
// calibration off. Some probes meet the user's prefill, most often its
// tail, whose tokens are few and dear (attention), so the
// engine's prompt counter puts such a probe at a level of about 1.2 while
// its TTFT is up to 1.8 times one request's alone. Counted as idle, those
// probes drag the bound from one level (the threshold over one request's
// TTFT, capacity.Evaluate) below what the idle probes give; at the
// prefills their TTFTs span (capacity's spanned), they are not idle. In
// this run 7 of 89 probes queued so: counted as idle they put the capacity
// at 2.78, 5% under the idle probes' bound (2.94); with spanned, 2.98.
func TestQueuedLoneProbesAreNotIdle(t *testing.T) {
	reports, err := sim.Reports()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := sim.LookupProfile(reports[2].Profile)
	if err != nil {
		t.Fatal(err)
	}
	const cfg = `
targets: [{name: sim, url: 'http://sim'}]
probe_budget: 0.3
calibration: {enabled: false}
scenarios:
  - {name: ctx-64k, input_tokens: 65536, output_tokens: 32, interval: 40s}
use_cases:
  - {name: document, scenario: ctx-64k, ttft_max: 12s}
`
	w := watch(t, prof, cfg, sim.Steps{Levels: []int{1}, Hold: horizon.Seconds()}, sim.Shape{Context: 65536, Output: 1024, Weight: 1}, "document", 3)
	if !w.done {
		return
	}
	quickest, queued := math.Inf(1), 0
	for _, p := range w.est.Points {
		quickest = math.Min(quickest, p.TTFT)
	}
	for _, p := range w.est.Points {
		if p.Level <= 1.5 && p.TTFT > 1.5*quickest {
			queued++
		}
	}
	if queued == 0 {
		t.Fatalf("no probe at a token level of 1.5 or less took 1.5 times the quickest (%.2f s): nothing to test", quickest)
	}
	want := 12 / quickest
	if got := w.est.Capacity; !(math.Abs(got-want) <= 0.03*want) || !w.est.OneLevel {
		t.Errorf("capacity %.2f (one level: %v), want the bound from the idle probes, about %.2f (%d queued probes of %d)", got, w.est.OneLevel, want, queued, len(w.est.Points))
	}
}
