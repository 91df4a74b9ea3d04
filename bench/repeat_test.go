package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"testing/synctest"
)

func TestCI95(t *testing.T) {
	tests := []struct {
		vs   []float64
		want float64
	}{
		{[]float64{1, 2, 3}, 4.303 / math.Sqrt(3)}, // sd 1, t(2)
		{[]float64{5, 5, 5, 5}, 0},
		{[]float64{2, 4}, 12.706 * math.Sqrt(2) / math.Sqrt(2)},
	}
	for _, tc := range tests {
		if got := ci95(tc.vs); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("ci95(%v) = %g, want %g", tc.vs, got, tc.want)
		}
	}
	if !math.IsNaN(ci95([]float64{1})) {
		t.Error("one run has no interval")
	}
}

// --repeat 3 measures each cell three times; the report pools them and gives
// every figure and limit its interval.
func TestRepeatGivesIntervals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := serveSim(t, "tiny", 1, nil)
		rep := newReport(Plan{Contexts: []int{256}, Concurrency: []int{1, 2, 4, 8}, Output: 16, Repeat: 3})
		if err := newRunner(tg).Run(t.Context(), rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Cells) != 12 {
			t.Fatalf("%d cells measured, want 4 levels x 3 runs", len(rep.Cells))
		}
		one, _ := rep.Cell(Key{Mode: "closed", Context: 256, Output: 16, Concurrency: 1})
		eight, _ := rep.Cell(Key{Mode: "closed", Context: 256, Output: 16, Concurrency: 8})
		if one.Runs != 3 || len(one.Requests) != 3*DefaultRounds {
			t.Fatalf("pooled n=1: %d runs, %d requests; want 3 and %d", one.Runs, len(one.Requests), 3*DefaultRounds)
		}
		for _, m := range []string{"ttft_s", "decode_tps", "throughput_tps"} {
			if ci := one.CI[m]; math.IsNaN(ci) || ci < 0 {
				t.Errorf("n=1 %s: interval %g", m, ci)
			}
		}
		// A TTFT threshold half-way between one and eight requests crosses in
		// each run: three limits, and the interval of their mean.
		mid := (one.Stats["ttft_s"].Mean + eight.Stats["ttft_s"].Mean) / 2
		rep.Plan.UseCases = []UseCase{{Name: "u", Context: 256, Output: 16, Statistic: "mean", TTFTMax: mid}}
		rep.Derive()
		l := rep.Limits[0]
		if len(l.Runs) != 3 || math.IsNaN(l.CI) || !strings.Contains(l.String(), "± ") {
			t.Fatalf("limit %s: runs %v, interval %g; want three runs and an interval", l, l.Runs, l.CI)
		}
		var html bytes.Buffer
		if err := rep.WriteHTML(&html); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(html.String(), " ± "); n < 4*6 {
			t.Errorf("%d figures with an interval in the HTML, want every mean of the 4 cells (6 each) and more", n)
		}
		// The charts draw the intervals as bars.
		if n := strings.Count(html.String(), `class="ci"`); n < 4 {
			t.Errorf("%d interval bars in the charts, want one per point at least on the TTFT chart", n)
		}
	})
}
