package estimator_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/scripted"
	"github.com/headroom-dev/headroom/sim"
)

// verdict is how one estimate of one use case compares with its truth.
type verdict struct {
	family, law, load, useCase string
	seed                       uint64
	truth                      float64
	est                        capacity.Estimate
}

func (v verdict) has() bool { return !math.IsNaN(v.est.Capacity) }
func (v verdict) within() bool {
	return v.has() && sim.CapacityWithin(v.est.Capacity, v.truth, false, false)
}
func (v verdict) inside() bool { return v.est.Lower <= v.truth && v.truth <= v.est.Upper }

// off2x: an estimate more than twice, or less than half, the truth, and
// not within the tolerance (a truth of 0.8 read as 0.3 is within 1).
func (v verdict) off2x() bool {
	return v.has() && !v.within() && (v.est.Capacity > 2*v.truth || v.est.Capacity < v.truth/2)
}

// lowerBound: the export is a lower bound only; holds says the truth is
// at or above it.
func (v verdict) lowerBound() bool { return v.est.Bound == "lower" }
func (v verdict) holds() bool      { return v.est.Lower <= v.truth }

// TestGeneralizationSuite runs the shipped monitor and estimator with the
// shipped defaults (the configuration names only the target) for the
// horizon in virtual time at the default 2% budget against the scripted
// servers of internal/scripted, whose true capacities come from their laws
// (scripted.Law.Truth), never from headroom: each family's laws drawn at
// scripted.SuiteSeeds seeds, each idle and under its production load. It logs, per
// run and use case, the truth, the estimate, its bounds and the verdicts,
// and the totals per family and overall, for docs/capacity.md. Issue 36's
// done-when (at least 90% within 15% or 1 request, the truth inside the
// bounds in at least 95%, none more than 2x off) is asserted with
// HEADROOM_SUITE_ASSERT=1; without it, the floors of floors_test.go.
// HEADROOM_SUITE_SEEDS_FROM=N draws the servers at seeds N on instead
// (suiteSeedsFrom): servers the model was never measured on;
// HEADROOM_SUITE_SEEDS=N draws N laws of each family, not
// scripted.SuiteSeeds (.ci/run runs fewer).
// An export that is only a lower bound (Bound "lower", no capacity) counts
// as no estimate, so never as within; its bound is judged by whether the
// truth is at least Lower.
func TestGeneralizationSuite(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("an hour of virtual time per run: not under -short or -race")
	}
	from, err := suiteSeedsFrom()
	if err != nil {
		t.Fatal(err)
	}
	count, err := seedCount("HEADROOM_SUITE_SEEDS", scripted.SuiteSeeds)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := sim.Reports()
	if err != nil {
		t.Fatal(err)
	}
	// The truth's request shape is the reports': the scenario's prompt and
	// the output length the reports measured each use case at.
	inputs := map[string]int{}
	for _, sc := range config.DefaultScenarios() {
		inputs[sc.Name] = sc.InputTokens
	}
	outputs := map[string]int{}
	for _, u := range reports[0].UseCases {
		outputs[u.Name] = u.Output
	}
	useCases := config.DefaultUseCases()
	const cfgText = "targets: [{name: sim, url: 'http://sim'}]\n"

	type run struct {
		law      scripted.Law
		loaded   bool
		verdicts []verdict
		done     bool
	}
	var runs []*run
	for _, f := range scripted.Families() {
		for i := range uint64(count) {
			seed := from - 1 + i
			law := f.Draw(seed + 1)
			truths := map[string]float64{}
			for _, u := range useCases {
				truths[u.Name] = law.Truth(inputs[u.Scenario], outputs[u.Name], u)
			}
			for _, loaded := range []bool{false, true} {
				rn := &run{law: law, loaded: loaded}
				runs = append(runs, rn)
				load := "idle"
				var prod *scripted.Production
				if loaded {
					load, prod = "loaded", scripted.DrawProduction(seed+1)
				}
				t.Run(fmt.Sprintf("%s/%d/%s", f.Name, seed+1, load), func(t *testing.T) {
					t.Parallel()
					w := watchHandler(t, func(ctx context.Context, wg *sync.WaitGroup) http.Handler {
						srv := scripted.NewServer(law, prod)
						wg.Go(func() { srv.Run(ctx) })
						return srv
					}, cfgText, "", seed+1)
					if w.occupancy > 0.02+1e-4 {
						t.Errorf("probes occupied %.2f%% of the time, budget 2%%", 100*w.occupancy)
					}
					for _, u := range useCases {
						e, ok := w.all[u.Name]
						if !ok {
							t.Errorf("the estimator never listed %s", u.Name)
						}
						rn.verdicts = append(rn.verdicts, verdict{family: f.Name, law: law.Family, load: load, useCase: u.Name, seed: seed + 1,
							truth: truths[u.Name], est: e})
					}
					rn.done = w.done
					t.Logf("%s: %s", load, law)
					if n := len(w.summaries); n > 0 {
						t.Logf("last summary: %s", w.summaries[n-1])
					}
					t.Logf("bursts: %s", w.burstList())
					for _, v := range rn.verdicts {
						lone, after, burst := probeMix(v.est.Points)
						t.Logf("%s: truth %.1f, capacity %.1f [%.1f, %.1f] %s aim=%.2f reach=%.1f; %s (probes: %d lone, %d right after a burst, %d in bursts)",
							v.useCase, v.truth, v.est.Capacity, v.est.Lower, v.est.Upper, v.est.Bound, v.est.Aim, v.est.Reach, v.est.Why, lone, after, burst)
					}
				})
			}
		}
	}
	t.Cleanup(func() {
		var all []verdict
		ran := 0
		for _, rn := range runs {
			if rn.done {
				all = append(all, rn.verdicts...)
				ran++
			}
		}
		t.Logf("%d of %d runs\n%s\n%s", ran, len(runs), suiteTable(all), mixTable(all))
		if ran < len(runs) {
			return
		}
		var s tally
		s.add(all...)
		wl, il, om := atLeast(suiteWithinRate, s.runs), atLeast(suiteInsideRate, s.runs), atMost(suiteOff2xRate, s.runs)
		if s.within < wl || s.inside < il || s.off2x > om {
			t.Errorf("%d within, %d inside the bounds, %d off 2x, of %d; floors %d, %d and at most %d", s.within, s.inside, s.off2x, s.runs, wl, il, om)
		}
		if os.Getenv("HEADROOM_SUITE_ASSERT") != "1" {
			return
		}
		if 10*s.within < 9*s.runs {
			t.Errorf("%d of %d within 15%% or 1 request of the truth, want at least 90%%", s.within, s.runs)
		}
		if 100*s.inside < 95*s.runs {
			t.Errorf("the truth inside the bounds in %d of %d, want at least 95%%", s.inside, s.runs)
		}
		if s.off2x > 0 {
			t.Errorf("%d estimates more than 2x off the truth, want none", s.off2x)
		}
	})
}

// suiteSeedsFrom is the first seed the suite draws its servers at:
// HEADROOM_SUITE_SEEDS_FROM, 1 by default. The default seeds are the ones
// the model has been measured against since the suite began, so that a
// change is judged on servers it was never tried on by moving them.
func suiteSeedsFrom() (uint64, error) {
	v := os.Getenv("HEADROOM_SUITE_SEEDS_FROM")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("HEADROOM_SUITE_SEEDS_FROM=%q: want a seed of 1 or more", v)
	}
	return n, nil
}

// tally counts verdicts.
type tally struct{ runs, has, within, inside, off2x, lower, lowerHolds int }

func (s *tally) add(vs ...verdict) {
	for _, v := range vs {
		s.runs++
		count := func(n *int, ok bool) {
			if ok {
				*n++
			}
		}
		count(&s.has, v.has())
		count(&s.within, v.within())
		count(&s.inside, v.inside())
		count(&s.off2x, v.off2x())
		count(&s.lower, v.lowerBound())
		count(&s.lowerHolds, v.lowerBound() && v.holds())
	}
}

func (s tally) cells() []string {
	return []string{fmt.Sprint(s.runs), fmt.Sprint(s.has), fmt.Sprint(s.within), fmt.Sprint(s.inside), fmt.Sprint(s.off2x), fmt.Sprintf("%d of %d", s.lowerHolds, s.lower)}
}

// mdRow writes a Markdown table row, aligned by the tabwriter.
func mdRow(w io.Writer, cells ...string) {
	fmt.Fprintf(w, "| %s\t|\n", strings.Join(cells, "\t| "))
}

// suiteTable is the suite's table in Markdown: each run and use case, then
// the totals per family and use case, and overall.
func suiteTable(vs []verdict) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	num := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	mdRow(tw, "law", "seed", "load", "use case", "truth", "estimate", "lower", "upper", "bound", "within", "inside", ">2x off")
	mdRow(tw, "---", "---", "---", "---", "---", "---", "---", "---", "---", "---", "---", "---")
	for _, v := range vs {
		mdRow(tw, v.law, fmt.Sprint(v.seed), v.load, v.useCase, num(v.truth), num(v.est.Capacity), num(v.est.Lower), num(v.est.Upper),
			v.est.Bound, yes(v.within()), yes(v.inside()), yes(v.off2x()))
	}
	tw.Flush()
	b.WriteString("\n")
	mdRow(tw, "law", "use case", "runs", "estimate", "within 15%/1", "truth inside bounds", ">2x off", "lower bounds holding")
	mdRow(tw, "---", "---", "---", "---", "---", "---", "---", "---")
	type key struct{ family, useCase string }
	var keys []key
	per := map[key]*tally{}
	var all tally
	for _, v := range vs {
		k := key{v.family, v.useCase}
		if per[k] == nil {
			per[k] = &tally{}
			keys = append(keys, k)
		}
		per[k].add(v)
		all.add(v)
	}
	for _, k := range keys {
		mdRow(tw, append([]string{k.family, k.useCase}, per[k].cells()...)...)
	}
	mdRow(tw, append([]string{"all", ""}, all.cells()...)...)
	tw.Flush()
	return b.String()
}

// probeMix counts a window's probes: lone ones the model reads, lone ones
// right after a burst (Aftermath, which it leaves out), and burst probes.
func probeMix(points []capacity.Point) (lone, after, burst int) {
	for _, p := range points {
		switch {
		case p.Aftermath:
			after++
		case p.Burst > 1:
			burst++
		default:
			lone++
		}
	}
	return lone, after, burst
}

// mixTable is the mean of each kind of probe per run, by use case and
// load: how the schedule spent the budget (docs/operations.md).
func mixTable(vs []verdict) string {
	type key struct{ useCase, load string }
	var keys []key
	sums := map[key]*[4]float64{}
	for _, v := range vs {
		k := key{v.useCase, v.load}
		if sums[k] == nil {
			sums[k] = &[4]float64{}
			keys = append(keys, k)
		}
		lone, after, burst := probeMix(v.est.Points)
		sums[k][0]++
		sums[k][1] += float64(lone)
		sums[k][2] += float64(after)
		sums[k][3] += float64(burst)
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	mdRow(tw, "use case", "load", "lone probes a run", "right after a burst", "in bursts")
	mdRow(tw, "---", "---", "---", "---", "---")
	for _, k := range keys {
		m := sums[k]
		mdRow(tw, k.useCase, k.load, fmt.Sprintf("%.1f", m[1]/m[0]), fmt.Sprintf("%.1f", m[2]/m[0]), fmt.Sprintf("%.1f", m[3]/m[0]))
	}
	tw.Flush()
	return b.String()
}
