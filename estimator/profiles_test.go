package estimator_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"text/tabwriter"

	"github.com/headroom-dev/headroom/sim"
)

// idleWithinFloor is the least number of TestIdleHourOnEveryProfile's 25
// use cases within 15% or a request of the simulator at the hour: 17 at
// 59f1fbd (deterministic: an idle simulator draws nothing, and the
// monitor's jitter is seeded from the bubble's fixed clock). Two below it,
// so that a change that moves one burst is not taken for a regression.
const idleWithinFloor = 15

// TestIdleHourOnEveryProfile runs the shipped configuration for an hour of
// virtual time against an idle simulator of each calibrated profile,
// including reports 003 and 004, whose servers no table or suite of this
// package runs: their laws were never looked at while the model was made,
// so they say how it does on a server it has not seen. It logs, per
// profile and default use case, the simulator's own capacity (its closed
// loop, as `sim validate` computes it) beside the estimate and its bounds
// (`go test ./estimator -run TestIdleHourOnEveryProfile -v`), and holds
// that every lower bound holds, that no estimate is more than twice off,
// and the count within.
func TestIdleHourOnEveryProfile(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("an hour of virtual time per profile, ten times as long under -race: .ci/run runs it without")
	}
	reports, err := sim.Reports()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		profile  string
		truth    map[string]float64
		searched int // the most requests the truth's search tried (sim.UseCaseFigure.SearchTo)
		w        watched
	}
	rows := make([]*row, len(reports))
	t.Run("profiles", func(t *testing.T) {
		for i, r := range reports {
			prof, err := sim.LookupProfile(r.Profile)
			if err != nil {
				t.Fatal(err)
			}
			rw := &row{profile: r.File[:3], truth: map[string]float64{}}
			rows[i] = rw
			// Report 000's use cases are the defaults. The search for the
			// simulator's capacity goes to four times a report's figure
			// (SearchTo); 128 takes it to 512, every profile's max_batch.
			for _, u := range reports[0].UseCases {
				u.Capacity = 128
				rw.searched = u.SearchTo()
				c, capped := sim.CapacityLimit(prof.Params, u)
				if capped {
					c = math.Inf(1)
				}
				rw.truth[u.Name] = c
			}
			t.Run(rw.profile, func(t *testing.T) {
				t.Parallel()
				rw.w = watchHandler(t, func(ctx context.Context, wg *sync.WaitGroup) http.Handler {
					srv := sim.NewServer(prof, 1, "vllm")
					wg.Go(func() { srv.Run(ctx) })
					return srv.Handler()
				}, "targets: [{name: sim, url: 'http://sim'}]\n", "", 1)
			})
		}
	})
	if t.Failed() {
		return
	}
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "report\tuse case\tsimulator\tat 60 min\tbounds\twithin 15%/1\ttruth inside")
	within, total := 0, 0
	for _, rw := range rows {
		for _, u := range reports[0].UseCases {
			e, truth := rw.w.all[u.Name], rw.truth[u.Name]
			total++
			if math.IsInf(truth, 1) {
				// No n up to the search's end breaks a threshold: nothing
				// to judge the estimate by, and it counts as not within.
				fmt.Fprintf(tw, "%s\t%s\t> %d\t%.1f\t%.1f-%.1f\t-\t-\n", rw.profile, u.Name, rw.searched, e.Capacity, e.Lower, e.Upper)
				continue
			}
			text := "no number"
			ok := !math.IsNaN(e.Capacity) && math.Abs(e.Capacity-truth) <= math.Max(0.15*truth, 1)
			switch {
			case !math.IsNaN(e.Capacity):
				text = fmt.Sprintf("%.1f", e.Capacity)
				if e.Capacity > 2*truth || e.Capacity < truth/2 {
					t.Errorf("%s %s: estimate %.1f more than twice off the simulator's %.1f", rw.profile, u.Name, e.Capacity, truth)
				}
			case e.Bound != "":
				text = fmt.Sprintf("≥ %.1f", e.Lower)
				if e.Lower > truth {
					t.Errorf("%s %s: lower bound %.1f above the simulator's %.1f", rw.profile, u.Name, e.Lower, truth)
				}
			}
			if ok {
				within++
			}
			inside := e.Lower <= truth && truth <= e.Upper
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%.1f-%.1f\t%v\t%v\n", rw.profile, u.Name, truth, text, e.Lower, e.Upper, ok, inside)
		}
	}
	tw.Flush()
	t.Logf("an idle hour at the shipped defaults on each profile's simulator: %d of %d within 15%% or a request\n%s", within, total, out.String())
	if within < idleWithinFloor {
		t.Errorf("%d of %d within, floor %d", within, total, idleWithinFloor)
	}
}
