package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/virtual"
	"github.com/headroom-dev/headroom/sim"
)

// demoSeeds is how many draws of the demo's background load the test runs:
// the demo itself always draws seed 1, but what it shows at 3 minutes also
// moves with its bursts' timing against that load, which a wall clock
// varies from run to run; other seeds stand for those runs.
const demoSeeds = 6

// demoWithin is how many of demoSeeds x 5 use cases must be within 30% of
// the simulator's own capacity at 3 minutes: the floor under the measured
// count (23 before δp was measured where a chunk step lasts many decode
// steps, 21 and 20 since, 16 since a burst's batch counts production's
// rise and the arrival term is signed: a trade the generalization suite's
// servers, fresh seeds included, favoured by 27 within over three seed
// sets, docs/capacity.md; 19 at ed57884, 21 in three runs since a prompt
// stalls the twin's decodes once it reaches the engine, the floor five
// under it as 14 was under 19; 18 since the simulator's front end takes a
// request from its arrival, and the same in every run: before it, the
// count moved by a few between runs with the order goroutines woke in
// (sim.Engine.SubmitAt); 22 since a burst's level reads the prefill
// counter at the wall time of its last first token (monitor.burstLevel),
// the floor two under it; 26 since production's mean prompt is read less
// the probes' own (monitor.ownProbes), so that the demo's levels count
// production's prompts by their cost, the floor two under it; 27 since
// a lent bend goes on as its tangent past the lender's batches (seed 2's
// chatbot), the floor two under it; issue 36 asks for all of them).
const demoWithin = 25

// TestDemoInVirtualTime is `headroom demo` at 3 minutes, in virtual time:
// its flags' defaults, its configuration (demoConfig), its simulator and
// background load, read through the shipped monitor and estimator. It logs,
// per seed, each use case's capacity against the simulator's own
// (`headroom sim validate`), and holds that every use case shows a number
// and that at least demoWithin of them are within 30%.
func TestDemoInVirtualTime(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("minutes of virtual time, ten times as long under -race: .ci/run runs it without")
	}
	s, errs := readSettings()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	app := kingpin.New("headroom", "")
	demo := newDemoCmd(app, s, &promslog.Config{})
	if _, err := app.Parse([]string{"demo"}); err != nil {
		t.Fatal(err)
	}
	pattern, err := demo.sim.pattern()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := sim.LookupProfile(demo.sim.profile)
	if err != nil {
		t.Fatal(err)
	}
	report, ok := sim.ReportOf(prof)
	if !ok {
		t.Fatalf("profile %s has no report", prof.Name)
	}
	truth := map[string]float64{}
	for _, u := range report.UseCases {
		truth[u.Name], _ = sim.CapacityLimit(prof.Params, u)
	}
	cfg, err := config.Parse([]byte(demoConfig([]string{"http://sim"})))
	if err != nil {
		t.Fatal(err)
	}
	const at = 3 * time.Minute
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "seed\tuse case\tsimulator\tat 3 min\tbounds\twithin 30%")
	// Each seed its own bubble, two at a time on two cores: run one after
	// another they took 246 s of a CI run.
	shown := make([][]capacity.Estimate, demoSeeds)
	t.Run("seeds", func(t *testing.T) {
		for seed := range uint64(demoSeeds) {
			t.Run(fmt.Sprint(seed+1), func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					srv := sim.NewServer(prof, demo.sim.timeScale, demo.sim.style)
					v := virtual.Start(cfg, srv, func(ctx context.Context) { srv.RunLoad(ctx, pattern, sim.DefaultMix, seed+1) })
					time.Sleep(at)
					shown[seed] = v.Est.Estimates(v.Mon.Status(), time.Now())
					v.Stop()
				})
			})
		}
	})
	if t.Failed() {
		return
	}
	within := 0
	for seed, last := range shown {
		for _, e := range last {
			want := truth[e.UseCase]
			ok := !math.IsNaN(e.Capacity) && math.Abs(e.Capacity-want) <= 0.3*want
			if ok {
				within++
			}
			if math.IsNaN(e.Capacity) && e.Bound == "" {
				t.Errorf("seed %d: %s shows no number at 3 minutes", seed+1, e.UseCase)
			}
			fmt.Fprintf(tw, "%d\t%s\t%.1f\t%s\t%.1f-%.1f\t%v\n", seed+1, e.UseCase, want, e.Shown(), e.Lower, e.Upper, ok)
		}
	}
	tw.Flush()
	t.Logf("headroom demo at 3 minutes, virtual time, %d draws of its load: %d of %d within 30%%\n%s", demoSeeds, within, 5*demoSeeds, out.String())
	if within < demoWithin {
		t.Errorf("%d of %d within 30%% of the simulator's capacity, floor %d", within, 5*demoSeeds, demoWithin)
	}
}
