package collector

import (
	"bufio"
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/headroom-dev/headroom/capacity"
)

// capacityFamily is one of Capacity's per-estimate families, for
// WriteText: its value where the estimate has the series (Collect's rules).
type capacityFamily struct {
	name, help string
	value      func(e *capacity.Estimate) (float64, bool)
}

const (
	thresholdName, thresholdHelp = "headroom_slo_threshold", "A use case's threshold; slo: ttft_seconds, e2e_seconds, itl_seconds (maxima), decode_tokens_per_second (minimum)."
	infoName, infoHelp           = "headroom_use_case_info", "A use case and the scenario its probes run, always 1: joins thresholds to their scenario."
	sloLowerName, sloLowerHelp   = "headroom_slo_capacity_lower_requests", "Lower bound of the requests of the use case's shape sent together at which one threshold's law reaches it (the fit's 95% band); the least is headroom_capacity_lower_requests while the laws have slopes."
)

// capacityFamilies: margin, capacity, lower, upper, free, ratio, samples
// (NewCapacity's descriptions by their index).
var (
	capacityFamilies = []capacityFamily{
		{"headroom_slo_margin_ratio", "Smallest relative margin to a threshold over the use case's window; < 0 means breached.",
			func(e *capacity.Estimate) (float64, bool) { return e.Margin, !math.IsNaN(e.Margin) }},
		{"headroom_capacity_requests", "Estimated number of concurrent requests of the use case's shape at which it meets every threshold, from the fitted engine model; NaN when the data cannot place it (then only headroom_capacity_lower_requests is known).",
			func(e *capacity.Estimate) (float64, bool) { return e.Capacity, true }},
		{"headroom_capacity_lower_requests", "Lower bound of the capacity (the fit's 95% band); for a capacity the data cannot place, the bound they support.",
			func(e *capacity.Estimate) (float64, bool) { return e.Lower, !math.IsNaN(e.Lower) }},
		{"headroom_capacity_upper_requests", "Upper bound of the capacity (the fit's 95% band); +Inf where nothing bounds it from above.",
			func(e *capacity.Estimate) (float64, bool) { return e.Upper, !math.IsNaN(e.Lower) }},
		// Free requests and headroom exist only where capacity and load do:
		// an absent series, not a NaN, keeps alert expressions simple.
		{"headroom_free_requests", "How many more requests of the use case's shape fit on top of the load now; absent while the capacity is only a bound.",
			func(e *capacity.Estimate) (float64, bool) { return e.Free, !math.IsNaN(e.Free) }},
		{"headroom_ratio", "Headroom: free requests over the capacity, 0 to 1; absent while the capacity is only a bound.",
			func(e *capacity.Estimate) (float64, bool) {
				return e.Ratio, !math.IsNaN(e.Ratio) && !math.IsInf(e.Ratio, 0)
			}},
		{"headroom_capacity_samples", "Observations the use case's model rests on: lone probes, bursts and bench cells in its curve window.",
			func(e *capacity.Estimate) (float64, bool) { return float64(e.Samples), true }},
	}
)

// WriteText implements TextWriter: each family's series in the order of
// their label values, as the registry sorts them.
func (c *Capacity) WriteText(w *bufio.Writer, openMetrics bool) error {
	t := &text{w: w, om: openMetrics}
	us := slices.Clone(c.useCases())
	// info: scenario, use_case.
	slices.SortFunc(us, func(a, b capacity.UseCase) int {
		return cmp.Or(strings.Compare(a.Scenario, b.Scenario), strings.Compare(a.Name, b.Name))
	})
	for i, u := range us {
		if i == 0 {
			t.header(infoName, infoHelp, "gauge")
		}
		t.sample(infoName, "", []string{"scenario", u.Scenario, "use_case", u.Name}, false, 0, 1)
	}
	// threshold: slo, use_case.
	type threshold struct {
		slo, useCase string
		v            float64
	}
	var ths []threshold
	for _, u := range us {
		for _, s := range u.SLOs() {
			ths = append(ths, threshold{s.Name, u.Name, s.Threshold})
		}
	}
	slices.SortFunc(ths, func(a, b threshold) int {
		return cmp.Or(strings.Compare(a.slo, b.slo), strings.Compare(a.useCase, b.useCase))
	})
	for i, th := range ths {
		if i == 0 {
			t.header(thresholdName, thresholdHelp, "gauge")
		}
		t.sample(thresholdName, "", []string{"slo", th.slo, "use_case", th.useCase}, false, 0, th.v)
	}
	ests := c.estimates()
	// target, use_case.
	order := make([]int32, len(ests))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		return cmp.Or(strings.Compare(ests[a].Target, ests[b].Target), strings.Compare(ests[a].UseCase, ests[b].UseCase))
	})
	labels := make([]string, 0, 6)
	for _, f := range capacityFamilies {
		started := false
		for _, i := range order {
			e := &ests[i]
			v, ok := f.value(e)
			if !ok {
				continue
			}
			if !started {
				t.header(f.name, f.help, "gauge")
				started = true
			}
			labels = append(labels[:0], "target", e.Target, "use_case", e.UseCase)
			t.sample(f.name, "", labels, false, 0, v)
		}
	}
	// slo lower bounds: slo, target, use_case.
	var slos []string
	for _, e := range ests {
		for _, s := range e.SLOs {
			if !slices.Contains(slos, s.Name) {
				slos = append(slos, s.Name)
			}
		}
	}
	slices.Sort(slos)
	started := false
	for _, slo := range slos {
		for _, i := range order {
			e := &ests[i]
			for _, s := range e.SLOs {
				if s.Name != slo || math.IsNaN(s.Lower) {
					continue
				}
				if !started {
					t.header(sloLowerName, sloLowerHelp, "gauge")
					started = true
				}
				labels = append(labels[:0], "slo", slo, "target", e.Target, "use_case", e.UseCase)
				t.sample(sloLowerName, "", labels, false, 0, s.Lower)
			}
		}
	}
	return nil
}
