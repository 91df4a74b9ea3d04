package alerts

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
	"go.yaml.in/yaml/v3"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/sim"
)

// The pool of TestPoolSignalLeadsTheBreach: three replicas of the demo's
// simulated H200 (report 002's profile) serving chatbot's 32K contexts,
// each with users of that shape, Start of them for an hour, then 1% more
// each minute. The daemon runs with the shipped defaults but for the
// targets' pool and the one scenario they serve, so that production's
// requests are of the use case's shape. The truth the signal must lead is
// the latencies those users got, each request's as its user saw it
// (sim.RunLoadObserved), not the engines' histograms: those also count
// headroom's own probes and calibration bursts, whose long TTFTs read
// there as a breach that no user saw (9.1 s over one minute at 7 users
// per replica, when the test read them).
const (
	poolUseCase  = "chatbot"
	poolScenario = "ctx-32k"
	poolStart    = 6
	poolSize     = 3
	poolHold     = time.Hour
	poolGrowth   = 0.01
	poolHorizon  = 4*time.Hour + 30*time.Minute
	poolScrape   = 15 * time.Second
	minLead      = 5 * time.Minute
)

func poolConfig() string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for i := range poolSize {
		fmt.Fprintf(&b, "  - {name: sim%d, url: 'http://sim%d', pool: llama, scenarios: [%s]}\n", i, i, poolScenario)
	}
	return b.String()
}

// sample is one scraped or recorded value at a virtual time.
type sample struct {
	lset labels.Labels
	t    int64 // ms
	v    float64
}

// scraper turns what a page held into samples as Prometheus's scrape loop
// does: instance and job labels, histograms as their series, and a stale
// marker for each series the previous scrape had and this one lacks.
type scraper struct {
	job, instance string
	last          map[string]labels.Labels
}

func (s *scraper) add(out []sample, mfs map[string]*dto.MetricFamily, t int64) []sample {
	seen := map[string]labels.Labels{}
	put := func(name string, m *dto.Metric, extra []string, v float64) {
		b := labels.NewScratchBuilder(len(m.GetLabel()) + 4)
		b.Add(model.MetricNameLabel, name)
		b.Add("job", s.job)
		b.Add("instance", s.instance)
		for _, lp := range m.GetLabel() {
			if lp.GetValue() != "" {
				b.Add(lp.GetName(), lp.GetValue())
			}
		}
		for i := 0; i < len(extra); i += 2 {
			b.Add(extra[i], extra[i+1])
		}
		b.Sort()
		l := b.Labels()
		seen[l.String()] = l
		out = append(out, sample{l, t, v})
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				put(name, m, nil, m.GetGauge().GetValue())
			case dto.MetricType_COUNTER:
				put(name, m, nil, m.GetCounter().GetValue())
			case dto.MetricType_UNTYPED:
				put(name, m, nil, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				put(name+"_sum", m, nil, h.GetSampleSum())
				put(name+"_count", m, nil, float64(h.GetSampleCount()))
			}
		}
	}
	for k, l := range s.last {
		if _, ok := seen[k]; !ok {
			out = append(out, sample{l, t, math.Float64frombits(value.StaleNaN)})
		}
	}
	s.last = seen
	return out
}

// runPool runs the pool and the shipped monitor, estimator and collectors
// (wired as the daemon wires them) in a synctest bubble over memnet, and
// scrapes headroom's registry every 15 s of virtual time until the
// horizon. It returns the samples, from virtual time 0 at the bubble's
// start, and each replica's users' finished requests in the order they
// finished.
func runPool(t *testing.T, cfg *config.Config) ([]sample, [][]sim.Request) {
	var out []sample
	served := make([][]sim.Request, poolSize)
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prof, err := sim.LookupProfile("qwen3-coder-30b-a3b-fp8-h200-vllm")
		if err != nil {
			t.Fatal(err)
		}
		u, input := poolUseCaseOf(t, cfg)
		shape := sim.Shape{Context: input, Output: u.OutputTokens, Weight: 1}
		load := sim.Rising{Start: poolStart, Hold: poolHold.Seconds(), Growth: poolGrowth}
		var wg sync.WaitGroup
		var mu sync.Mutex
		listeners := map[string]*memnet.Listener{}
		var stops []func()
		for i := range poolSize {
			srv := sim.NewServer(prof, 1, "vllm")
			ln, stop := memnet.Serve(srv.Handler())
			listeners[fmt.Sprintf("sim%d:80", i)] = ln
			stops = append(stops, stop)
			wg.Go(func() { srv.Run(ctx) })
			wg.Go(func() {
				srv.RunLoadObserved(ctx, load, []sim.Shape{shape}, uint64(i+1), func(r sim.Request) {
					mu.Lock()
					served[i] = append(served[i], r)
					mu.Unlock()
				})
			})
		}
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			ln, ok := listeners[addr]
			if !ok {
				return nil, fmt.Errorf("no simulated replica at %s", addr)
			}
			return ln.Dial(ctx, network, addr)
		}
		start := time.Now()
		reg := prometheus.NewRegistry()
		est := estimator.New(cfg, nil)
		mon := monitor.New(slog.New(slog.DiscardHandler), collector.NewProbes(reg, false), est, est, monitor.WithDial(dial))
		reg.MustRegister(collector.NewTargets(mon.Status),
			collector.NewCapacity(est.UseCases, func() []capacity.Estimate { return est.Estimates(mon.Status(), time.Now()) }))
		mon.Apply(ctx, cfg)
		headroom := &scraper{job: "headroom", instance: "headroom:9835"}
		for time.Since(start) < poolHorizon {
			time.Sleep(poolScrape)
			ts := time.Since(start).Milliseconds()
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			page := map[string]*dto.MetricFamily{}
			for _, mf := range mfs {
				if mf.GetType() != dto.MetricType_HISTOGRAM {
					page[mf.GetName()] = mf
				}
			}
			out = headroom.add(out, page, ts)
		}
		mon.Stop()
		cancel()
		for _, stop := range stops {
			stop()
		}
		wg.Wait()
	})
	for _, rs := range served {
		slices.SortStableFunc(rs, func(a, b sim.Request) int { return cmp.Compare(a.Finished, b.Finished) })
	}
	return out, served
}

// breach is the use case's thresholds that a replica's users saw broken
// over the window that ends at virtual time end: the use case's statistic
// (capacity.Statistic, as the estimator judges probes) of the requests
// that finished in it, per threshold; "" when none broke. The window is
// the use case's own (30 minutes by default, the shortest the burn-rate
// rules read too), so a breach is what the use case's SLO calls one; the
// test logs shorter windows' breaches beside it.
func breach(u config.UseCase, served []sim.Request, end, window time.Duration) string {
	in := within(served, end, window)
	if len(in) == 0 {
		return ""
	}
	stat := func(f func(sim.Request) float64) float64 {
		vs := make([]float64, len(in))
		for k, r := range in {
			vs[k] = f(r)
		}
		return capacity.Statistic(vs, u.Statistic)
	}
	var broken []string
	if u.TTFTMax > 0 {
		if v := stat(sim.Request.TTFT); v > u.TTFTMax.Seconds() {
			broken = append(broken, fmt.Sprintf("%s TTFT %.3g s > %g s", u.Statistic, v, u.TTFTMax.Seconds()))
		}
	}
	if u.E2EMax > 0 {
		if v := stat(sim.Request.E2E); v > u.E2EMax.Seconds() {
			broken = append(broken, fmt.Sprintf("%s E2E %.3g s > %g s", u.Statistic, v, u.E2EMax.Seconds()))
		}
	}
	if u.ITLMax > 0 {
		if v := stat(sim.Request.ITL); v > u.ITLMax.Seconds() {
			broken = append(broken, fmt.Sprintf("%s ITL %.3g s > %g s", u.Statistic, v, u.ITLMax.Seconds()))
		}
	}
	if u.DecodeMinTPS > 0 {
		if v := stat(sim.Request.DecodeTPS); v < u.DecodeMinTPS {
			broken = append(broken, fmt.Sprintf("%s decode %.3g tokens/s < %g", u.Statistic, v, u.DecodeMinTPS))
		}
	}
	return strings.Join(broken, ", ")
}

// within is the requests of served (in the order they finished) that
// finished in the window that ends at end.
func within(served []sim.Request, end, window time.Duration) []sim.Request {
	from, to := (end - window).Seconds(), end.Seconds()
	return served[sort.Search(len(served), func(k int) bool { return served[k].Finished > from }):sort.Search(len(served), func(k int) bool { return served[k].Finished > to })]
}

// firstBreach is the first minute from..until at which a replica's users
// saw a threshold of u broken over window, the replica and what broke; -1
// if none.
func firstBreach(u config.UseCase, served [][]sim.Request, from, until, window time.Duration) (time.Duration, int, string) {
	for ts := from; ts <= until; ts += time.Minute {
		for i, rs := range served {
			if what := breach(u, rs, ts, window); what != "" {
				return ts, i, what
			}
		}
	}
	return -1, -1, ""
}

// observed is the use case's statistic of TTFT and decode speed that each
// replica's users saw over window ending at end, for the table.
func observed(u config.UseCase, served [][]sim.Request, end, window time.Duration) string {
	var s []string
	for _, rs := range served {
		var ttft, dec []float64
		for _, r := range within(rs, end, window) {
			ttft, dec = append(ttft, r.TTFT()), append(dec, r.DecodeTPS())
		}
		if len(ttft) == 0 {
			s = append(s, "-")
			continue
		}
		s = append(s, fmt.Sprintf("%.2g/%.3g", capacity.Statistic(ttft, u.Statistic), capacity.Statistic(dec, u.Statistic)))
	}
	return strings.Join(s, ",")
}

// poolUseCaseOf is the pool's use case and the input tokens of its
// scenario: the shape of its users' requests.
func poolUseCaseOf(t *testing.T, cfg *config.Config) (config.UseCase, int) {
	t.Helper()
	for _, u := range cfg.UseCases {
		if u.Name != poolUseCase {
			continue
		}
		for _, s := range cfg.Scenarios {
			if s.Name == u.Scenario {
				return u, s.InputTokens
			}
		}
	}
	t.Fatalf("no use case %s with a scenario", poolUseCase)
	return config.UseCase{}, 0
}

// evaluate loads the samples into a TSDB as they come and evaluates the
// rule file's groups every minute, in the file's order, with Prometheus's
// own rule manager and PromQL engine, as a Prometheus server (and promtool)
// does. Then query answers instant queries over the result.
type evaluation struct {
	engine *promql.Engine
	db     *teststorage.TestStorage
}

func evaluate(t *testing.T, samples []sample, ruleFile string, until time.Duration) *evaluation {
	t.Helper()
	db := teststorage.New(t)
	engine := promqltest.NewTestEngine(t, false, 0, 10_000_000)
	ctx := t.Context()
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(engine, db),
		AppendableV2: db,
		Context:      ctx,
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
	})
	groups, errs := m.LoadGroups(time.Minute, labels.EmptyLabels(), "", nil, false, ruleFile)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	b, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Groups []struct{ Name string } }
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var order []*rules.Group
	for _, g := range doc.Groups {
		order = append(order, groups[rules.GroupKey(ruleFile, g.Name)])
	}
	slices.SortStableFunc(samples, func(a, b sample) int { return int(a.t - b.t) })
	next := 0
	for ts := time.Minute; ts <= until; ts += time.Minute {
		app := db.Appender(ctx)
		for ; next < len(samples) && samples[next].t <= ts.Milliseconds(); next++ {
			if _, err := app.Append(0, samples[next].lset, samples[next].t, samples[next].v); err != nil {
				t.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
		for _, g := range order {
			g.Eval(ctx, time.UnixMilli(ts.Milliseconds()))
			for _, r := range g.Rules() {
				if err := r.LastError(); err != nil {
					t.Fatalf("rule %s at %s: %v", r.Name(), ts, err)
				}
			}
		}
	}
	return &evaluation{engine: engine, db: db}
}

// query is an instant query's vector at virtual time ts.
func (e *evaluation) query(t *testing.T, q string, ts time.Duration) promql.Vector {
	t.Helper()
	qry, err := e.engine.NewInstantQuery(t.Context(), e.db, nil, q, time.UnixMilli(ts.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	defer qry.Close()
	res := qry.Exec(t.Context())
	if res.Err != nil {
		t.Fatalf("%s: %v", q, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// TestPoolSignalLeadsTheBreach runs a pool of 3 simulated replicas under
// load rising 1% a minute after a steady hour, scrapes headroom every 15 s
// of virtual time, evaluates `headroom rules`' output for the
// configuration on the series with Prometheus's rule manager, and asks
// that the signal for one more replica
// (pool:headroom_replicas_desired:stabilized above the pool's 3 targets)
// come at least 5 minutes before the first minute at which any replica's
// users had a threshold of the use case broken: the use case's statistic
// (the shipped default's mean) of what their requests got, over its
// window (30 minutes), past its threshold (TTFT over 8 s, decode under 15
// tokens/s). That is what the use case's SLO calls a breach, judged on
// production's requests only (see runPool); the test logs when a 5- and a
// 1-minute window first broke too, a stricter reading of the same
// thresholds. docs/operations.md#autoscaling prints the lead this logs.
func TestPoolSignalLeadsTheBreach(t *testing.T) {
	if raceEnabled {
		t.Skip("4 hours of virtual time, minutes under -race: .ci/run runs it without -race")
	}
	cfg, err := config.Parse([]byte(poolConfig()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Rules(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ruleFile := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(ruleFile, out, 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := poolUseCaseOf(t, cfg)
	samples, served := runPool(t, cfg)
	for i, rs := range served {
		if len(rs) == 0 {
			t.Fatalf("replica %d's users finished no request", i)
		}
	}
	ev := evaluate(t, samples, ruleFile, poolHorizon)

	// The truth: the first minute whose window of the users' own requests
	// broke a threshold, on any replica.
	breachAt, replica, what := firstBreach(u, served, time.Minute, poolHorizon, u.Window)
	for _, w := range []time.Duration{5 * time.Minute, time.Minute} {
		if at, i, what := firstBreach(u, served, time.Minute, poolHorizon, w); at >= 0 {
			t.Logf("over %s windows, the first breach came at %s (ramp minute %.0f) on sim%d: %s", w, at, (at - poolHold).Minutes(), i, what)
		} else {
			t.Logf("over %s windows, no breach within %s", w, poolHorizon)
		}
	}
	const signal = `pool:headroom_replicas_desired:stabilized{pool="llama"} > pool:headroom_targets:count{pool="llama"}`
	var onset time.Duration = -1
	for ts := poolHold; ts <= poolHorizon && onset < 0; ts += time.Minute {
		if len(ev.query(t, signal, ts)) > 0 {
			onset = ts
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "minute  users  load (each replica)  capacity  lower bound  needed  desired  users' %s TTFT/decode over %s  reason\n", u.Statistic, model.Duration(u.Window))
	last := poolHorizon
	if breachAt >= 0 {
		last = breachAt
	}
	for ts := poolHold; ts <= last; ts += time.Minute {
		if ts%(5*time.Minute) == 0 || ts == onset || ts == breachAt {
			users := sim.Rising{Start: poolStart, Hold: poolHold.Seconds(), Growth: poolGrowth}.Users(ts.Seconds())
			fmt.Fprintf(&table, "%6.0f  %5d  %s  %s  %s  %6s  %7s  %s  %s\n", ts.Minutes(), users,
				values(ev.query(t, `sort_by_label(headroom_load_requests, "target")`, ts)),
				values(ev.query(t, `sort_by_label(headroom_capacity_requests{use_case="`+poolUseCase+`"}, "target")`, ts)),
				values(ev.query(t, `sort_by_label(headroom_capacity_lower_requests{use_case="`+poolUseCase+`"}, "target")`, ts)),
				values(ev.query(t, `pool_use_case:headroom_replicas_needed:ceil{pool="llama"}`, ts)),
				values(ev.query(t, `pool:headroom_replicas_desired:stabilized{pool="llama"}`, ts)),
				observed(u, served, ts, u.Window),
				reasons(ev.query(t, `pool_use_case_slo:headroom_replicas_needed:binding{pool="llama"}`, ts)))
		}
	}
	t.Logf("minutes from the run's start (the ramp starts at %.0f), users per replica, what headroom and the rules read, and what the users got:\n%s", poolHold.Minutes(), table.String())
	// The signal must come from the rising load, not before it: at the
	// steady hour's end the pool has its estimates and wants no more. It
	// failed here while the ITL law settled from one start only: sim0's
	// chatbot read 11.6 with a lower bound of 4.4 at 6 users (its truth
	// about 18), the law's least squares nearest the straight line
	// (capacity.fitITL).
	if v := ev.query(t, `pool:headroom_replicas_desired:stabilized{pool="llama"}`, poolHold); len(v) != 1 || v[0].F > poolSize {
		t.Errorf("at the steady load's end the desired replicas are %v, want at most %d", v, poolSize)
	}
	if v := ev.query(t, `pool_use_case:headroom_replicas_needed:ceil{pool="llama"}`, poolHold); len(v) != 1 {
		t.Errorf("no replicas needed at the steady load's end: the pool has no estimate (%v)", v)
	}
	switch {
	case breachAt < 0:
		t.Fatalf("no threshold broke within %s: the load never reached the capacity", poolHorizon)
	case breachAt <= poolHold:
		t.Fatalf("the users saw a threshold broken at %s, in the steady hour, on sim%d: %s", breachAt, replica, what)
	case onset < 0 || onset > breachAt:
		t.Fatalf("the first breach came at %s (ramp minute %.0f) on sim%d (%s) with no signal for one more replica before it", breachAt, (breachAt - poolHold).Minutes(), replica, what)
	}
	var off []string
	for ts := onset; ts <= breachAt; ts += time.Minute {
		if len(ev.query(t, signal, ts)) == 0 {
			off = append(off, fmt.Sprintf("%.0f", ts.Minutes()))
		}
	}
	if len(off) == 0 {
		t.Logf("the signal stayed on every minute from its start to the breach")
	} else {
		t.Logf("between the signal and the breach, it was off at the run's minutes %s", strings.Join(off, ", "))
	}
	lead := breachAt - onset
	t.Logf("signal for one more replica at %s (ramp minute %.0f), first breach at %s (ramp minute %.0f) on sim%d, %s over %s: lead %s",
		onset, (onset - poolHold).Minutes(), breachAt, (breachAt - poolHold).Minutes(), replica, what, model.Duration(u.Window), lead)
	if lead < minLead {
		t.Errorf("the signal led the breach by %s, want at least %s", lead, minLead)
	}
}

func values(v promql.Vector) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.3g", x.F))
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

func reasons(v promql.Vector) string {
	var s []string
	for _, x := range v {
		s = append(s, x.Metric.Get("use_case")+" "+x.Metric.Get("slo"))
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}
