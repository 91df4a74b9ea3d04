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
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
)

//go:embed status.html.tmpl
var pageTemplate string

var page = template.Must(template.New("status").Funcs(template.FuncMap{"num": num, "isNaN": math.IsNaN, "isInf": func(v float64) bool { return math.IsInf(v, 1) }}).Parse(pageTemplate))

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
		State  string // ok, low, breached, unknown
		Curves []chart
		Next   string
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
		tv := target{Target: t}
		if up := now.Sub(t.Since).Seconds(); up > 0 {
			spent := t.Busy.Seconds() / up
			tv.Spent = fmt.Sprintf("%.2f%% of %.2f%%", 100*spent, 100*t.Budget)
			if spent > t.Budget {
				// The monitor holds a target's next probe back for busy/budget
				// after each: a burst is paid for by the quiet after it, so the
				// share runs ahead of the budget until that quiet has passed
				// (the demo's page read 27.66% of 25% at 3 minutes).
				tv.Spent += " (ahead after a burst: the quiet that follows pays for it)"
			}
		}
		for _, e := range byTarget[t.Name] {
			r := row{Estimate: e, State: state(e), Next: until(e.NextProbe, now)}
			for _, s := range e.SLOs {
				r.Curves = append(r.Curves, plot(s, e.Points))
			}
			tv.Rows = append(tv.Rows, r)
		}
		tv.Scenarios = scenarios(t, now)
		ts = append(ts, tv)
	}
	return page.Execute(w, map[string]any{"Targets": ts, "Now": now.UTC().Format(time.RFC3339), "Refresh": int(refresh.Seconds())})
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
	return fmt.Sprintf("%.1f", v)
}
