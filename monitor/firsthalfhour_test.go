package monitor_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"text/tabwriter"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/virtual"
	"github.com/headroom-dev/headroom/sim"
)

// TestFirstHalfHour is what the README's first screen tells a new user to
// expect: the shipped defaults (the five use cases, a 2% budget,
// calibration on) against the simulator of report 000's server, for 30
// minutes of virtual time, idle and under 6 users of 8K-context chat. It
// logs, per use case, when the page first shows a bound ("≥ x") and a
// capacity, and what it shows at 30 minutes (`go test ./monitor -run
// TestFirstHalfHour -v`), and holds that every use case shows a number by
// then, a bound at least.
func TestFirstHalfHour(t *testing.T) {
	if testing.Short() {
		t.Skip("an hour of virtual time")
	}
	prof, cfg := report000(t, shipped)
	const half = 30 * time.Minute
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "server\tuse case\tfirst bound\tfirst capacity\tat 30 min")
	for _, run := range []struct {
		name  string
		users int
	}{{"idle", 0}, {"6 users", 6}} {
		type seen struct{ bound, capacity time.Duration }
		first := map[string]*seen{}
		last := watch(t, prof, cfg, run.users, half, func(since time.Duration, es []capacity.Estimate) {
			for _, e := range es {
				s := first[e.UseCase]
				if s == nil {
					s = &seen{-1, -1}
					first[e.UseCase] = s
				}
				if s.bound < 0 && (e.Bound != "" || !math.IsNaN(e.Capacity)) {
					s.bound = since
				}
				if s.capacity < 0 && !math.IsNaN(e.Capacity) {
					s.capacity = since
				}
			}
		})
		when := func(d time.Duration) string {
			if d < 0 {
				return "not yet"
			}
			return fmt.Sprintf("%.0f min", d.Minutes())
		}
		for _, e := range last {
			s := first[e.UseCase]
			now := "no number"
			switch {
			case !math.IsNaN(e.Capacity):
				now = fmt.Sprintf("capacity %.1f (%.1f-%.1f)", e.Capacity, e.Lower, e.Upper)
			case e.Bound != "":
				now = fmt.Sprintf("≥ %.1f", e.Lower)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", run.name, e.UseCase, when(s.bound), when(s.capacity), now)
			if s.bound < 0 {
				t.Errorf("%s: %s shows no number after 30 minutes", run.name, e.UseCase)
			}
		}
	}
	tw.Flush()
	t.Logf("the first half hour at the shipped defaults, report 000's simulator:\n%s", out.String())
}

// watch runs the shipped daemon against a fresh simulator of prof for d of
// virtual time, under users of 8K-context chat (none: idle), calls each
// (when not nil) every 10 s with the time since it started and the
// estimates then, and returns the last.
func watch(t *testing.T, prof sim.Profile, cfg *config.Config, users int, d time.Duration, each func(time.Duration, []capacity.Estimate)) []capacity.Estimate {
	var last []capacity.Estimate
	synctest.Test(t, func(t *testing.T) {
		srv := sim.NewServer(prof, 1, "vllm")
		var loads []func(context.Context)
		if users > 0 {
			loads = append(loads, func(ctx context.Context) {
				srv.RunLoad(ctx, sim.Steps{Levels: []int{users}, Hold: 2 * d.Seconds()}, []sim.Shape{{Context: 8192, Output: 512, Weight: 1}}, 1)
			})
		}
		start := time.Now()
		v := virtual.Start(cfg, srv, loads...)
		for time.Since(start) < d {
			time.Sleep(10 * time.Second)
			last = v.Est.Estimates(v.Mon.Status(), time.Now())
			if each != nil {
				each(time.Since(start), last)
			}
		}
		v.Stop()
	})
	return last
}

// A run in virtual time repeats: the same server, load and seed give the
// same estimates, under production too, whose users and the probes are
// woken at the same virtual instants in whatever order the scheduler
// picks (sim.Engine.SubmitAt). Four runs of the half hour under six users:
// before SubmitAt, about one run in three read otherwise.
func TestALoadedRunRepeats(t *testing.T) {
	if testing.Short() {
		t.Skip("two hours of virtual time")
	}
	prof, cfg := report000(t, shipped)
	shown := func(es []capacity.Estimate) string {
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "%s %v [%v, %v] %s; ", e.UseCase, e.Capacity, e.Lower, e.Upper, e.Bound)
		}
		return b.String()
	}
	want := shown(watch(t, prof, cfg, 6, 30*time.Minute, nil))
	for i := range 3 {
		if got := shown(watch(t, prof, cfg, 6, 30*time.Minute, nil)); got != want {
			t.Fatalf("run %d read %s, the first %s", i+2, got, want)
		}
	}
}

// shipped is the configuration of one target with the defaults for the
// rest.
const shipped = "targets: [{name: sim, url: 'http://sim'}]\n"

// report000 is the simulator profile of report 000's server and the
// configuration cfg parses to.
func report000(t *testing.T, cfg string) (sim.Profile, *config.Config) {
	t.Helper()
	reports, err := sim.Reports()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := sim.LookupProfile(reports[0].Profile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return prof, c
}
