// Package statuspage renders headroom's human view of capacity: per target
// and use case the capacity (steady and burst), load, free requests, ratio
// and margin, coloured ok, low or breached; the fitted curves with their
// points and thresholds as inline SVG; how far each use case is from an
// estimate; each scenario's next probe and last failure; and the probe
// budget spent. One self-contained page: nothing is fetched when it is
// viewed, and it refreshes itself.
package statuspage

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
)

//go:embed status.html.tmpl
var pageTemplate string

var page = template.Must(template.New("status").Funcs(template.FuncMap{"num": num, "isNaN": math.IsNaN, "isInf": func(v float64) bool { return math.IsInf(v, 1) },
	"add": func(a, b float64) float64 { return a + b }, "sub": func(a, b float64) float64 { return a - b }, "half": func(a float64) float64 { return a / 2 }}).Parse(pageTemplate))

// Target is one target's state beside its estimates.
type Target struct {
	collector.TargetStatus
	// Busy is the probe time spent on it since Since, the budget its share.
	Busy   time.Duration
	Since  time.Time
	Budget float64
}

// Render writes the page for the targets and their estimates at now.
func Render(w io.Writer, targets []Target, estimates []capacity.Estimate, now time.Time, refresh time.Duration) error {
	type row struct {
		capacity.Estimate
		State  string // ok, low, breached, bound, unknown
		Reason string // why a row is not ok, and what would change it
		Curves []chart
		Next   string
		Laws   string // the fitted model's terms (laws)
	}
	type target struct {
		Target
		Spent     string
		Rows      []row
		Scenarios []scenario
	}
	byTarget := map[string][]capacity.Estimate{}
	for _, e := range estimates {
		byTarget[e.Target] = append(byTarget[e.Target], e)
	}
	var ts []target
	for _, t := range targets {
		tv := target{Target: t, Spent: spent(t, now)}
		for _, e := range byTarget[t.Name] {
			r := row{Estimate: e, State: state(e), Next: until(e.NextProbe, now)}
			r.Reason = reason(e, r.State, now)
			r.Laws = capacity.Describe(e.Model())
			for _, s := range e.SLOs {
				r.Curves = append(r.Curves, plot(s, e))
			}
			tv.Rows = append(tv.Rows, r)
		}
		tv.Scenarios = scenarios(t, now)
		ts = append(ts, tv)
	}
	return page.Execute(w, map[string]any{"Targets": ts, "Now": now.UTC().Format(time.RFC3339), "Refresh": int(refresh.Seconds())})
}

// spent is the share of the target's time its probes took since Since,
// against the budget. The monitor holds a target's next probe back for
// busy/budget after each probe or burst: the quiet after a probe pays for
// it, so the share since start runs ahead of the budget until that quiet
// has passed (right after the first probe, and after a burst: the demo's
// page read 27.66% of 25% at 3 minutes), and the line says so.
func spent(t Target, now time.Time) string {
	up := now.Sub(t.Since).Seconds()
	if up <= 0 {
		return ""
	}
	share := t.Busy.Seconds() / up
	out := fmt.Sprintf("%.2f%% of %.2f%%", 100*share, 100*t.Budget)
	if share > t.Budget {
		out += " (ahead for now: the quiet the monitor keeps after each probe pays for it, and the share falls back under the budget as it passes)"
	}
	return out
}

// unread is why a row's load is unknown.
const unread = "its metrics cannot be read"

// reason says in a sentence why a row is not ok and what would change it,
// "" for an ok row.
func reason(e capacity.Estimate, state string, now time.Time) string {
	next := ""
	if !e.NextProbe.IsZero() {
		next = fmt.Sprintf(" The next probe of %s is %s (%s UTC); a shorter interval for the scenario or a larger probe_budget brings it sooner.",
			e.Scenario, until(e.NextProbe, now), e.NextProbe.UTC().Format("15:04:05"))
	}
	why := strings.TrimSuffix(e.Why, ".")
	switch state {
	case "breached":
		s, ok := worst(e.SLOs)
		if !ok {
			return "Breached: a threshold is broken at the current load; it recovers as the load falls."
		}
		// The margin is the fitted model's for one more request at the load
		// now once it has an estimate, the window's lone probes' before: the
		// value it stands for is the threshold moved by it, in both cases.
		cmp, v := "above the maximum", s.Threshold*(1-s.Margin)
		if s.Name == "decode_tokens_per_second" {
			cmp, v = "below the minimum", s.Threshold*(1+s.Margin)
		}
		if math.IsNaN(e.Capacity) || math.IsNaN(e.Load) {
			// No placed laws, or no load to read them at (the engine's
			// metrics cannot be read): the margin is what the window's
			// probes met at the loads production made, not a reading for
			// one more request (capacity.fitted.reads).
			load := short(e.Load)
			if math.IsNaN(e.Load) {
				load = "unknown (" + unread + ")"
			}
			out := fmt.Sprintf("Breached: the window's probes met %s %s, %s of %s; the load now is %s.", sloTitle(s.Name), withUnit(v, s.Name), cmp, withUnit(s.Threshold, s.Name), load)
			if e.BoundsOne() {
				// The bound counts requests of this shape alone; the load,
				// every shape production sends (a 96K prompt costs more).
				out += fmt.Sprintf(" Alone, at least %.1f of its requests together fit: the load counts every shape.", e.Lower)
			}
			return out + " It recovers as the load falls, or with more replicas."
		}
		out := fmt.Sprintf("Breached: one more request at the load now (%s) would get %s %s, %s of %s.", short(e.Load), sloTitle(s.Name), withUnit(v, s.Name), cmp, withUnit(s.Threshold, s.Name))
		if e.Load > e.Capacity {
			return out + fmt.Sprintf(" It recovers once the load falls under the capacity (%.1f), or with more replicas.", e.Capacity)
		}
		// Under the capacity and breached all the same: production's
		// requests cost more than as many of this shape (longer prompts,
		// more KV tokens read at every step).
		return out + fmt.Sprintf(" The load counts requests of every shape production sends; the capacity, %.1f, requests of this one alone, and production's weigh more here than as many of its. It recovers as the load falls, or with more replicas.", e.Capacity)
	case "low":
		return fmt.Sprintf("Low: %.1f of %.1f requests free (%.0f%%), under the 20%% at which HeadroomLow warns; less load or more replicas raise it.",
			math.Max(0, e.Free), e.Capacity, 100*math.Max(0, e.Ratio))
	case "bound":
		out := "Only a lower bound, under one request: the data do not place the capacity yet"
		if e.BoundsOne() {
			out = fmt.Sprintf("Only a lower bound: the capacity is at least %.1f", e.Lower)
		}
		// The model's why opens with the bound it gives ("at least 12.0:").
		if _, rest, ok := strings.Cut(why, ": "); ok && strings.HasPrefix(why, "at least") {
			why = rest
		}
		if why != "" {
			out += " (" + why + ")"
		}
		// A burst places it only where one may still go further: past
		// the setting that holds calibration the page says which it is,
		// not a burst that will never come.
		switch e.BurstLimitBy {
		case capacity.LimitCalibrationOff:
			return out + "; calibration is off (" + e.BurstLimitBy + "), so only production's own load going further places it." + next
		case capacity.LimitMaxBurst:
			return out + fmt.Sprintf("; calibration has sent the largest burst it may (%d probes, %s), so only a larger max_burst, or production's own load going further, places it.", e.BurstLimit, e.BurstLimitBy) + next
		case capacity.LimitBudget:
			sent := fmt.Sprintf("has sent the largest burst the probe budget pays for within the use case's window (%d probes)", e.BurstLimit)
			if e.BurstLimit < 2 {
				sent = "can pay for no burst within the use case's window"
			}
			return out + "; calibration " + sent + ", so only a larger probe_budget, or production's own load going further, places it." + next
		}
		return out + "; a calibration burst nearer the threshold places it." + next
	case "unknown":
		out := "No estimate yet"
		if why != "" {
			out += ": " + why
		}
		if e.Samples < e.SamplesNeeded {
			out += fmt.Sprintf("; %d of the %d observations it needs", e.Samples, e.SamplesNeeded)
		}
		if math.IsNaN(e.Load) {
			out += "; the server's load is unknown (" + unread + ")"
		}
		return out + "." + next
	}
	return ""
}

// worst is the SLO with the smallest margin.
func worst(slos []capacity.SLO) (capacity.SLO, bool) {
	best, ok := capacity.SLO{Margin: math.Inf(1)}, false
	for _, s := range slos {
		if s.Margin < best.Margin {
			best, ok = s, true
		}
	}
	return best, ok
}

// state is the row's colour: breached when a threshold is, bound when the
// data only bound the capacity from below (never a page), low when fewer
// than 20% of the capacity are free (HeadroomLow's warning), unknown
// without a capacity or a load.
func state(e capacity.Estimate) string {
	switch {
	case e.Margin < 0:
		return "breached"
	case e.Bound != "":
		return "bound"
	case math.IsNaN(e.Capacity) || math.IsNaN(e.Ratio):
		return "unknown"
	case e.Ratio < 0.2:
		return "low"
	}
	return "ok"
}

type scenario struct{ Name, Next, Err string }

func scenarios(t Target, now time.Time) []scenario {
	names := make([]string, 0, len(t.Next))
	for n := range t.Next {
		names = append(names, n)
	}
	for n := range t.ProbeErrs {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := make([]scenario, len(names))
	for i, n := range names {
		out[i] = scenario{Name: n, Next: until(t.Next[n], now), Err: t.ProbeErrs[n]}
	}
	return out
}

func until(at, now time.Time) string {
	switch {
	case at.IsZero():
		return "-"
	case !at.After(now):
		return "now"
	}
	return "in " + at.Sub(now).Round(time.Second).String()
}

// num shows a number to one decimal, "-" for NaN and infinities: the
// precision the test compares with /api/v1/status.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if out := fmt.Sprintf("%.1f", v); out != "-0.0" {
		return out
	}
	return "0.0" // a margin of -0.01 is none, not a negative zero
}
