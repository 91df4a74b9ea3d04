package monitor

import (
	"math"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/probe"
)

func TestBurstLevel(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name                               string
		n                                  int
		waiting, prefilled, prompt, queued float64
		want                               float64
	}{
		{"a clean cell prefills its own prompts", 8, 0, 8 * 1024, 1024, nan, 8},
		{"arrivals during the wave count", 8, 0, 10 * 1024, 1024, nan, 10},
		{"by their share of the work", 8, 0, 8*1024 + 2*512, 1024, nan, 9},
		{"queued ones count once", 4, 3, 7 * 1024, 1024, 1024, 7},
		{"a lagging counter never lowers the level", 4, 3, 2 * 1024, 1024, 1024, 7},
		{"queued ones by production's prompt", 2, 3, 2 * 65536, 65536, 8192, 2.375},
		{"longer ones queued ahead of a short prompt", 1, 2, 0, 1024, 8192, 17},
		{"no prefill counter: burst and queue", 4, 3, nan, 1024, nan, 7},
		{"nothing known but the burst", 4, nan, nan, 1024, 2048, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BurstLevel(tc.n, tc.waiting, tc.prefilled, tc.prompt, tc.queued); got != tc.want {
				t.Errorf("BurstLevel(%d, %v, %v, %v, %v) = %v, want %v", tc.n, tc.waiting, tc.prefilled, tc.prompt, tc.queued, got, tc.want)
			}
		})
	}
}

func TestPrefillLogAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p prefillLog
	p.add(t0, 100)
	p.add(t0.Add(time.Second), math.NaN()) // an engine without the counter adds nothing
	p.add(t0.Add(time.Second), 300)
	p.add(t0.Add(3*time.Second), 500)
	tests := []struct {
		at   time.Duration
		want float64
	}{
		{0, 100},
		{500 * time.Millisecond, 200},
		{2 * time.Second, 400},
		{3 * time.Second, 500},
		{-time.Second, 100},
		{4 * time.Second, math.NaN()}, // no reading after it: unknown
	}
	for _, tc := range tests {
		got := p.at(t0.Add(tc.at))
		if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("at(+%s) = %v, want %v", tc.at, got, tc.want)
		}
	}
}

// A burst is tagged at its last first token, in the server's own count of
// its prompts, or the scenario's where the server gave none.
func TestBurstLevelOfSamples(t *testing.T) {
	start := time.Unix(1000, 0)
	before := engine.Load{Waiting: 0, PrefilledTokens: 100}
	log := &prefillLog{}
	log.add(start, 100)
	log.add(start.Add(1500*time.Millisecond), 100+3*1000)
	log.add(start.Add(2500*time.Millisecond), 100+5*1000)
	sample := func(ttft time.Duration, prompt int) Sample {
		return Sample{Result: probe.Result{TTFT: ttft, PromptTokens: prompt}}
	}
	two := []Sample{sample(time.Second, 1000), sample(2*time.Second, 1000)}
	if got := burstLevel(two, 2, before, true, log, start, 4000, math.NaN()); got != 4 {
		t.Errorf("level %v, want 4: 4000 tokens prefilled by the last first token, 1000 per prompt", got)
	}
	// A simulator ten times real time: the probes' times are its own
	// (Result.Scaled), the readings the wall's.
	scaled := before
	scaled.TimeScale = 10
	if got := burstLevel([]Sample{sample(10*time.Second, 1000), sample(20*time.Second, 1000)}, 2, scaled, true, log, start, 4000, math.NaN()); got != 4 {
		t.Errorf("level %v on a simulator at 10x, want 4: read at the wall time of the last first token", got)
	}
	unsized := []Sample{sample(time.Second, 0), sample(2*time.Second, 0)}
	if got := burstLevel(unsized, 2, before, true, log, start, 500, math.NaN()); got != 8 {
		t.Errorf("level %v, want 8 in the scenario's 500-token prompts", got)
	}
	if got := burstLevel(two, 2, before, false, log, start, 1000, math.NaN()); !math.IsNaN(got) {
		t.Errorf("level %v with no reading before the burst, want NaN", got)
	}
	if got := burstLevel(two, 2, before, true, nil, start, 1000, math.NaN()); got != 2 {
		t.Errorf("level %v with no prefill counter, want the burst's 2", got)
	}
}

// A burst's probes are keyed, for decode, to the requests in flight while
// each decoded: production when the burst was sent, plus the burst's own
// probes for the share of that decode they were still running.
func TestDecodeInFlight(t *testing.T) {
	start := time.Unix(1000, 0)
	sample := func(ttft, e2e time.Duration) Sample {
		return Sample{InFlight: 1, Result: probe.Result{Start: start, TTFT: ttft, E2E: e2e}}
	}
	tests := []struct {
		name    string
		samples []Sample
		want    []float64
	}{
		// All three decode from 1 s to 3 s together: 10 + 3.
		{"decoded together", []Sample{sample(time.Second, 3*time.Second), sample(time.Second, 3*time.Second), sample(time.Second, 3*time.Second)}, []float64{13, 13, 13}},
		// The first decodes 1-2 s with all three; the second 1-3 s, the
		// first gone halfway: 10 + 1 + 1 + 0.5; the third 2-4 s, the
		// second gone halfway: 10 + 1 + 0.5.
		{"staggered", []Sample{sample(time.Second, 2*time.Second), sample(time.Second, 3*time.Second), sample(2*time.Second, 4*time.Second)},
			[]float64{13, 12.5, 11.5}},
		// No decode span (one token): keeps the readings' mean; the other
		// decodes after it ended.
		{"no decode", []Sample{sample(time.Second, time.Second), sample(time.Second, 2*time.Second)}, []float64{1, 11}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			decodeInFlight(tc.samples, 10)
			for i, s := range tc.samples {
				if math.Abs(s.InFlight-tc.want[i]) > 1e-9 {
					t.Errorf("probe %d: in flight %v, want %v", i, s.InFlight, tc.want[i])
				}
			}
		})
	}
}

// A burst's production rise is the median, over its probes read right after
// they ended, of production's running requests then (the engine's in
// flight less the burst's others still in flight, less the engine's
// waiting beyond the burst's others still without a first token), less
// the production it was sent beside.
func TestProductionRise(t *testing.T) {
	start := time.Unix(1000, 0)
	read := func(ttft, e2e time.Duration, inFlight, waiting float64) Sample {
		return Sample{Ended: inFlight, EndedWaiting: waiting, Result: probe.Result{Start: start, TTFT: ttft, E2E: e2e}}
	}
	ended := func(e2e time.Duration, inFlight float64) Sample { return read(time.Second, e2e, inFlight, 0) }
	lost := Sample{Lost: true, Ended: math.NaN(), Result: probe.Result{Start: start}}
	tests := []struct {
		name    string
		samples []Sample
		want    float64
	}{
		// Sent beside 2; as each ended, the engine counted the others still
		// running and 5 of production: 3 more.
		{"rose", []Sample{ended(2*time.Second, 7), ended(3*time.Second, 6), ended(4*time.Second, 5)}, 3},
		// The same readings, production unchanged: none.
		{"steady", []Sample{ended(2*time.Second, 4), ended(3*time.Second, 3), ended(4*time.Second, 2)}, 0},
		// Production fell to 1 by the end.
		{"fell", []Sample{ended(2*time.Second, 3), ended(3*time.Second, 2), ended(4*time.Second, 1)}, -1},
		// A probe read at a moment production passed through: the median
		// keeps the others' 3.
		{"one reading off", []Sample{ended(2*time.Second, 7), ended(3*time.Second, 12), ended(4*time.Second, 5)}, 3},
		// A lost probe ran until it was cut: still in flight at every end.
		{"lost", []Sample{ended(2*time.Second, 7), ended(3*time.Second, 6), lost}, 3},
		// A server that prefills one prompt at a time: production's 2 run
		// throughout, and 3 of its prompts queued behind the burst's wait
		// to the end. In flight rose by 3; running did not.
		{"queued behind", []Sample{read(time.Second, 2*time.Second, 7, 5), read(3*time.Second, 4*time.Second, 6, 4),
			read(5*time.Second, 6*time.Second, 5, 3)}, 0},
		// The engine's waiting prompts are the burst's own: production's 2
		// run beside them.
		{"the burst queued", []Sample{read(time.Second, 2*time.Second, 4, 2), read(3*time.Second, 4*time.Second, 3, 1),
			read(5*time.Second, 6*time.Second, 2, 0)}, 0},
		// No reading after any probe: nothing known.
		{"unread", []Sample{ended(2*time.Second, math.NaN()), lost}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := productionRise(tc.samples, 2); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("rise %v, want %v", got, tc.want)
			}
		})
	}
}
