package statuspage

import (
	"bytes"
	"errors"
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
	target := Target{TargetStatus: collector.TargetStatus{Name: "gpu-1", Pool: "llama-70b", Model: "m", Engine: "vllm", URL: "http://gpu-1:8000", Up: true,
		Next: map[string]time.Time{"ctx-8k": t0.Add(90 * time.Second)}, ProbeErrs: map[string]string{"ctx-96k": "timeout: " + errors.New("read stream: context deadline exceeded").Error()}},
		Busy: 36 * time.Second, Since: t0.Add(-time.Hour), Budget: 0.02}
	var b bytes.Buffer
	if err := Render(&b, []Target{target}, []capacity.Estimate{est("ok", 10, 8, 0.5), est("low", 10, 1, 0.1), bound,
		est("breached", 10, 0, -0.2), unknown}, t0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/status.html", b.Bytes())
	page := b.String()
	for _, want := range []string{`class="ok" data-target="gpu-1" data-use-case="ok"`, `class="low"`, `class="bound"`, `class="breached"`, `class="unknown"`,
		"probe budget spent 1.00% of 2.00%", "timeout: read stream", `<td class="capacity">10.0</td>`, `<td class="capacity">-</td>`,
		`<td class="capacity">&ge; 12.0</td>`, `<td class="bounds">8.0 &ndash; 12.0</td>`, `<td class="bounds">12.0 &ndash; &infin;</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// The aftermath probe is not drawn: two points per chart.
	if n := strings.Count(page, "<circle"); n != 5*2 {
		t.Errorf("%d points drawn, want 2 per chart", n)
	}
}

// The budget's share since start runs ahead of the budget after a burst,
// and the page says why rather than show a budget overrun unexplained.
func TestBudgetSpent(t *testing.T) {
	for _, tc := range []struct {
		busy  time.Duration
		want  string
		ahead bool
	}{
		{36 * time.Second, "probe budget spent 1.00% of 2.00%", false},
		{72 * time.Second, "probe budget spent 2.00% of 2.00%", false},
		{108 * time.Second, "probe budget spent 3.00% of 2.00% (ahead after a burst", true},
	} {
		var b bytes.Buffer
		target := Target{TargetStatus: collector.TargetStatus{Name: "gpu-1", URL: "http://gpu-1:8000", Up: true}, Busy: tc.busy, Since: t0.Add(-time.Hour), Budget: 0.02}
		if err := Render(&b, []Target{target}, nil, t0, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		if !strings.Contains(page, tc.want) || strings.Contains(page, "ahead after a burst") != tc.ahead {
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
