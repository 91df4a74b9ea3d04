package statuspage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/internal/golden"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// One target with a use case of each state: its page, as a golden file.
func TestRender(t *testing.T) {
	ps := []capacity.Point{
		{Time: t0, Load: 1, InFlight: 1, TTFT: 0.5, Decode: 90},
		{Time: t0, Load: 4, InFlight: 4, TTFT: 2, Decode: 40, Burst: 4},
		{Time: t0, Load: 1, InFlight: 1, TTFT: 9, Decode: 90, Aftermath: true},
		// Cut by its deadline (lost): not drawn.
		{Time: t0, Load: 4, InFlight: 4, TTFT: 2.5, E2E: 40, Decode: math.NaN(), Burst: 4, Lost: true},
		{Time: t0, Load: 2, InFlight: 2, TTFT: 151, Decode: 80}, // an outlier: drawn at the top, not scaling the axis
	}
	slo := capacity.SLO{Name: "ttft_seconds", Threshold: 3, Curve: capacity.Curve{{Load: 1, Value: 0.5, N: 1}, {Load: 4, Value: 2, N: 1}}}
	est := func(name string, c, free, margin float64) capacity.Estimate {
		e := capacity.Estimate{Target: "gpu-1", UseCase: name, Scenario: "ctx-8k", Capacity: c, Lower: 0.8 * c, Upper: 1.2 * c,
			Load: 2, Margin: margin, Samples: 3, SamplesNeeded: 2, NextProbe: t0.Add(90 * time.Second), SLOs: []capacity.SLO{slo}, Points: ps}
		e.Free, e.Ratio = free, free/c
		return e
	}
	unknown := est("unknown", math.NaN(), math.NaN(), 0.5)
	unknown.Lower, unknown.Upper = math.NaN(), math.NaN()
	unknown.Why = "TTFT: no requests sent together at two levels yet"
	bound := est("bound", math.NaN(), math.NaN(), 0.5)
	bound.Bound, bound.Lower, bound.Upper = "lower", 12, math.Inf(1)
	bound.Why = "at least 12.0: decode threshold not reached; requests together up to 4"
	breached := est("breached", 10, 0, -0.2)
	breached.SLOs = []capacity.SLO{slo}
	breached.SLOs[0].Value, breached.SLOs[0].Margin = 3.6, -0.2
	target := Target{TargetStatus: collector.TargetStatus{Name: "gpu-1", Pool: "llama-70b", Model: "m", Engine: "vllm", URL: "http://gpu-1:8000", Up: true,
		Next: map[string]time.Time{"ctx-8k": t0.Add(90 * time.Second)}, ProbeErrs: map[string]string{"ctx-96k": "timeout: " + errors.New("read stream: context deadline exceeded").Error()}},
		Busy: 36 * time.Second, Since: t0.Add(-time.Hour), Budget: 0.02}
	var b bytes.Buffer
	if err := Render(&b, []Target{target}, []capacity.Estimate{est("ok", 10, 8, 0.5), est("low", 10, 1, 0.1), bound,
		breached, unknown}, t0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/status.html", b.Bytes())
	page := b.String()
	for _, want := range []string{`class="row ok" data-target="gpu-1" data-use-case="ok"`, `class="row low"`, `class="row bound"`, `class="row breached"`, `class="row unknown"`,
		"probe budget spent 1.00% of 2.00%", "timeout: read stream", `<td class="capacity">10.0</td>`, `<td class="capacity">-</td>`,
		`<td class="capacity">≥ 12.0</td>`, `<td class="bounds">8.0 &ndash; 12.0</td>`, `<td class="bounds">12.0 &ndash; &infin;</td>`,
		// A sentence per non-ok row: why, and what would change it.
		"Low: 1.0 of 10.0 requests free (10%), under the 20% at which HeadroomLow warns",
		// Breached under its capacity: production's requests weigh more
		// than as many of the use case's shape, and the sentence says so.
		"Breached: one more request at the load now (2) would get time to first token 3.6 s, above the maximum of 3 s. The load counts requests of every shape production sends; the capacity, 10.0, requests of this one alone, and production&#39;s weigh more here than as many of its. It recovers as the load falls, or with more replicas.",
		"load (every shape)", "3 (2 needed)",
		"Only a lower bound: the capacity is at least 12.0 (decode threshold not reached; requests together up to 4); a calibration burst nearer the threshold places it. The next probe of ctx-8k is in 1m30s (12:01:30 UTC)",
		"No estimate yet: TTFT: no requests sent together at two levels yet. The next probe of ctx-8k is in 1m30s",
		// Axes with ticks and units, the load and the capacity marked, the outlier clipped and said.
		`class="xtick"`, `class="ytick"`, "time to first token (s)", "load 2", "capacity 10.0", "capacity ≥ 12.0", `class="band"`,
		"1 above 6 s, marked over the chart", `class="clipped"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// The aftermath and the lost probes are not drawn, the outlier is drawn clipped: two
	// points and one clipped mark per chart.
	if n, c := strings.Count(page, "<circle"), strings.Count(page, `<path class="clipped"`); n != 5*2 || c != 5 {
		t.Errorf("%d points and %d clipped marks drawn, want 2 and 1 per chart", n, c)
	}
	// The ok row has no reason; every other row has one.
	if n := strings.Count(page, `<p class="reason">`); n != 4 {
		t.Errorf("%d reason sentences, want one per non-ok row (4)", n)
	}
}

// A bound under one request says the data place nothing yet, not "at least
// 0.0", in its sentence, its capacity cell and its chart (no marker at
// zero): report 000's 32K chatbot beside 6 users of 8K chat, its first half
// hour (TestFirstHalfHour), fitted a TTFT line whose bands cross nowhere.
// Breached, such a row adds no count of its requests that fit alone; a
// bound of one or more still does.
func TestABoundUnderOneRequest(t *testing.T) {
	curve := capacity.Curve{{Load: 1, Value: 2, N: 1}, {Load: 3, Value: 6, N: 1}}
	held := []capacity.SLO{{Name: "ttft_seconds", Threshold: 8, Value: 5, Margin: 0.4, Curve: curve}}
	breached := []capacity.SLO{{Name: "ttft_seconds", Threshold: 8, Value: 9, Margin: -0.125, Curve: curve}}
	for _, tc := range []struct {
		name          string
		lower, margin float64
		slos          []capacity.SLO
		want, not     string
		cell, marker  string // the capacity column, the chart's capacity label ("": none)
	}{
		{"a bound", 0, 0.4, held,
			"Only a lower bound, under one request: the data do not place the capacity yet (the laws&#39; bands place no threshold (up to no bound)); a calibration burst nearer the threshold places it.", "at least 0.0", "not placed", ""},
		{"breached", 0, -0.125, breached, "Breached: the window&#39;s probes met", "at least 0.0", "not placed", ""},
		{"breached, a bound of three", 3, -0.125, breached, "Alone, at least 3.0 of its requests together fit", "under one request", "≥ 3.0", "capacity ≥ 3.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := capacity.Estimate{Target: "gpu-1", UseCase: "chatbot", Scenario: "ctx-32k", Capacity: math.NaN(), Bound: "lower", Lower: tc.lower, Upper: math.Inf(1),
				Load: 6, Margin: tc.margin, Free: math.NaN(), Ratio: math.NaN(), Samples: 3, SamplesNeeded: 2, NextProbe: t0.Add(90 * time.Second), SLOs: tc.slos,
				Why: fmt.Sprintf("at least %.1f: the laws' bands place no threshold (up to no bound)", tc.lower)}
			target := Target{TargetStatus: collector.TargetStatus{Name: "gpu-1", URL: "http://gpu-1:8000", Up: true, Next: map[string]time.Time{"ctx-32k": t0.Add(90 * time.Second)}}, Since: t0.Add(-time.Hour), Budget: 0.02}
			page, reason := renderReason(t, target, e)
			if !strings.Contains(reason, tc.want) || strings.Contains(reason, tc.not) {
				t.Errorf("the row's sentence %q lacks %q or has %q", reason, tc.want, tc.not)
			}
			if cell := `<td class="capacity">` + tc.cell + `</td>`; !strings.Contains(page, cell) {
				t.Errorf("the page has no %s", cell)
			}
			if !strings.Contains(page, "<svg") {
				t.Fatal("no chart drawn")
			}
			if got := strings.Contains(page, "capacity ≥"); got != (tc.marker != "") || !strings.Contains(page, tc.marker) {
				t.Errorf("the chart's capacity label: want %q (none if empty), the page has one: %v", tc.marker, got)
			}
		})
	}
}

// A bound whose bursts can go no further says which setting holds them,
// not that a burst will place it; one whose next burst will come says so.
func TestABoundNamesWhatHoldsCalibration(t *testing.T) {
	for _, tc := range []struct {
		limit     int
		by        string
		want, not string
	}{
		{0, "", "; a calibration burst nearer the threshold places it. The next probe", "max_burst"},
		{64, "calibration.max_burst", "; calibration has sent the largest burst it may (64 probes, calibration.max_burst), so only a larger max_burst, or production&#39;s own load going further, places it. The next probe", "a calibration burst nearer"},
		{6, "probe_budget", "; calibration has sent the largest burst the probe budget pays for within the use case&#39;s window (6 probes), so only a larger probe_budget", "a calibration burst nearer"},
		{1, "probe_budget", "; calibration can pay for no burst within the use case&#39;s window, so only a larger probe_budget", "(1 probes)"},
		{0, "calibration.enabled", "; calibration is off (calibration.enabled), so only production&#39;s own load going further places it.", "a calibration burst nearer"},
	} {
		t.Run(tc.by, func(t *testing.T) {
			e := capacity.Estimate{Target: "gpu-1", UseCase: "short-chatbot", Scenario: "ctx-8k", Capacity: math.NaN(), Bound: "lower", Lower: 128, Upper: math.Inf(1),
				Load: 1, Margin: 0.9, Free: math.NaN(), Ratio: math.NaN(), Samples: 70, SamplesNeeded: 2, NextProbe: t0.Add(90 * time.Second),
				BurstLimit: tc.limit, BurstLimitBy: tc.by, Why: "at least 128.0: TTFT threshold not reached; requests together up to 64"}
			target := Target{TargetStatus: collector.TargetStatus{Name: "gpu-1", URL: "http://gpu-1:8000", Up: true}, Since: t0.Add(-time.Hour), Budget: 0.02}
			_, reason := renderReason(t, target, e)
			if !strings.Contains(reason, tc.want) || strings.Contains(reason, tc.not) {
				t.Errorf("the row's sentence %q lacks %q or has %q", reason, tc.want, tc.not)
			}
		})
	}
}

// renderReason renders one target with one estimate and returns the page and
// the estimate's row sentence.
func renderReason(t *testing.T, target Target, e capacity.Estimate) (page, reason string) {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, []Target{target}, []capacity.Estimate{e}, t0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	page = b.String()
	i := strings.Index(page, `<p class="reason">`)
	if i < 0 {
		t.Fatal("the page has no row sentence")
	}
	reason = page[i:]
	return page, reason[:strings.Index(reason, "</p>")]
}

// A margin that rounds to zero from below reads 0.0, not -0.0.
func TestNum(t *testing.T) {
	for v, want := range map[float64]string{-0.04: "0.0", -0.06: "-0.1", 0.04: "0.0", 2.25: "2.2", math.NaN(): "-", math.Inf(1): "-"} {
		if got := num(v); got != want {
			t.Errorf("num(%g) = %q, want %q", v, got, want)
		}
	}
}

// The budget's share since start runs ahead of the budget after a probe
// or a burst, and the page says why rather than show a budget overrun
// unexplained; it names no burst, which may not have been sent.
func TestBudgetSpent(t *testing.T) {
	for _, tc := range []struct {
		busy  time.Duration
		want  string
		ahead bool
	}{
		{36 * time.Second, "probe budget spent 1.00% of 2.00%", false},
		{72 * time.Second, "probe budget spent 2.00% of 2.00%", false},
		{108 * time.Second, "probe budget spent 3.00% of 2.00% (ahead for now: the quiet the monitor keeps after each probe pays for it", true},
	} {
		var b bytes.Buffer
		target := Target{TargetStatus: collector.TargetStatus{Name: "gpu-1", URL: "http://gpu-1:8000", Up: true}, Busy: tc.busy, Since: t0.Add(-time.Hour), Budget: 0.02}
		if err := Render(&b, []Target{target}, nil, t0, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		if !strings.Contains(page, tc.want) || strings.Contains(page, "ahead for now") != tc.ahead {
			t.Errorf("busy %v: page says %q, want %q (ahead: %v)", tc.busy, budgetLine(page), tc.want, tc.ahead)
		}
	}
}

func budgetLine(page string) string {
	i := strings.Index(page, "probe budget spent")
	if i < 0 {
		return ""
	}
	return page[i:min(len(page), i+90)]
}

// A breach names the value one more request would get, from the SLO's
// margin (the fitted model's once there is an estimate), never the
// window's statistic beside it, which may lie on the other side (131 tok/s
// read "below the minimum of 15" on the demo's page).
func TestBreachReason(t *testing.T) {
	e := capacity.Estimate{UseCase: "chatbot", Load: 12, Capacity: 10, Margin: -0.2,
		SLOs: []capacity.SLO{{Name: "ttft_seconds", Threshold: 8, Value: 2, Margin: 0.3}, {Name: "decode_tokens_per_second", Threshold: 15, Value: 131, Margin: -0.2}}}
	want := "Breached: one more request at the load now (12) would get decode speed 12 tok/s, below the minimum of 15 tok/s. It recovers once the load falls under the capacity (10.0), or with more replicas."
	if got := reason(e, state(e), t0); got != want {
		t.Errorf("reason:\n got %s\nwant %s", got, want)
	}
	// A bound's margin is the window's probes', what users met; the bound
	// counts its shape alone, the load every shape (the demo's page: code
	// completion "≥ 29.6" beside a breach at a load of 9).
	b := capacity.Estimate{UseCase: "code-completion", Load: 9, Capacity: math.NaN(), Bound: "lower", Lower: 29.6, Upper: 218, Margin: -1.05,
		SLOs: []capacity.SLO{{Name: "e2e_seconds", Threshold: 2, Value: 4.1, Margin: -1.05}}}
	want = "Breached: the window's probes met end-to-end time 4.1 s, above the maximum of 2 s; the load now is 9. Alone, at least 29.6 of its requests together fit: the load counts every shape. It recovers as the load falls, or with more replicas."
	if got := reason(b, state(b), t0); got != want {
		t.Errorf("a bound's breach:\n got %s\nwant %s", got, want)
	}
	// A placed capacity whose load cannot be read keeps the window's
	// margin (the model reads no load it does not have): the sentence
	// says what the probes met, not what one more request would get at a
	// load of "NaN".
	u := capacity.Estimate{UseCase: "chatbot", Load: math.NaN(), Capacity: 10, Margin: -0.2,
		SLOs: []capacity.SLO{{Name: "ttft_seconds", Threshold: 8, Value: 9.6, Margin: -0.2}}}
	want = "Breached: the window's probes met time to first token 9.6 s, above the maximum of 8 s; the load now is unknown (its metrics cannot be read). It recovers as the load falls, or with more replicas."
	if got := reason(u, state(u), t0); got != want {
		t.Errorf("a breach at an unknown load:\n got %s\nwant %s", got, want)
	}
}
