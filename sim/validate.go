package sim

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// Check is one compared figure.
type Check struct {
	Name      string
	Kind      string
	Report    float64
	Simulated float64
	Err       float64 // relative error
	Tolerance string
	OK        bool
	Judged    bool
	Note      string
	// bound is the largest |Err| within tolerance; only a shortfall counts
	// against a capped limit ("N+").
	bound   float64
	lowOnly bool
}

// outside is how far a judged check's error goes beyond a share of its
// tolerance: 0 inside it.
func (c Check) outside(share float64) float64 {
	e := math.Abs(c.Err)
	if c.lowOnly {
		e = -c.Err
	}
	return math.Max(0, e-share*c.bound)
}

func figureName(f Figure) string {
	return fmt.Sprintf("%s %s %dK/%d n=%d", f.Mode, f.Metric, f.Context/1024, f.Output, f.N)
}

// Validate replays a report's protocol with a profile's parameters and
// compares each figure: key findings within 10%, capacity-table figures within
// 20%, capacity limits within 15% or 1 request, whichever is larger.
func Validate(p Params, r Report) []Check { return validate(p, r, cellCache{}) }

func validate(p Params, r Report, cells cellCache) []Check {
	var out []Check
	for _, f := range r.Figures {
		v := Simulate(p, r, f, cells)
		e := v/f.Value - 1
		tol := Tolerance(f.Kind)
		c := Check{Name: figureName(f), Kind: f.Kind, Report: f.Value, Simulated: v, Err: e, Note: f.Note, bound: tol}
		c.Judged = tol > 0 && f.Note == ""
		c.OK = !c.Judged || math.Abs(e) <= tol
		if c.Judged {
			c.Tolerance = fmt.Sprintf("%.0f%%", tol*100)
		}
		out = append(out, c)
	}
	for _, u := range r.UseCases {
		got, capped := capacityLimit(p, u, cells)
		c := Check{Name: "capacity " + u.Name, Kind: "capacity", Report: u.Capacity, Simulated: got, Err: got/u.Capacity - 1,
			Tolerance: "15% or 1", Judged: true, OK: CapacityWithin(got, u.Capacity, u.Capped, capped), bound: capacityBound(u.Capacity)}
		if u.Capped {
			c.Tolerance = fmt.Sprintf(">= %.0f (report: %.0f+)", u.Capacity*(1-capacityShare), u.Capacity)
			c.bound, c.lowOnly = capacityShare, true
		}
		out = append(out, c)
	}
	for _, q := range r.SafeQueue {
		got := safeDepth(p, q, cells)
		out = append(out, Check{Name: fmt.Sprintf("safe queue depth %dK TTFT<=%gs", q.Context/1024, q.TTFTMax), Kind: "capacity",
			Report: q.Depth, Simulated: got, Err: got/q.Depth - 1, Tolerance: "15% or 1", Judged: true, OK: CapacityWithin(got, q.Depth, false, false),
			bound: capacityBound(q.Depth)})
	}
	return out
}

// capacityShare is a capacity limit's tolerance: 15% (or 1 request).
const capacityShare = 0.15

// CapacityTolerance is CapacityWithin's, in requests.
func CapacityTolerance(want float64) float64 { return math.Max(1, capacityShare*want) }

func capacityBound(want float64) float64 { return CapacityTolerance(want) / want }

// CapacityWithin is the tolerance of a capacity limit: 15% or 1 request,
// whichever is larger; a report's "N+" (capped) needs at least 85% of N.
func CapacityWithin(got, want float64, capped, gotCapped bool) bool {
	if capped {
		return gotCapped || got >= want*(1-capacityShare)
	}
	return math.Abs(got-want) <= CapacityTolerance(want)
}

// PrintChecks writes the comparison table and reports whether all passed.
func PrintChecks(w io.Writer, r Report, checks []Check) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tkind\treport\tsimulated\terror\ttolerance\tverdict\n")
	all := true
	for _, c := range checks {
		verdict := "ok"
		switch {
		case !c.Judged && c.Note != "":
			verdict = "not judged: " + c.Note
		case !c.Judged:
			verdict = "info"
		case !c.OK:
			verdict = "FAIL"
			all = false
		}
		fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%+.1f%%\t%s\t%s\n", c.Name, c.Kind, c.Report, c.Simulated, 100*c.Err, c.Tolerance, verdict)
	}
	tw.Flush()
	return all
}
