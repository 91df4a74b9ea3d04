package alerts

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/headroom-dev/headroom/internal/exposition"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/sim"
)

// The pool of TestPoolSignalLeadsTheBreach: three replicas of the demo's
// simulated H200 (report 002's profile) serving chatbot's 32K contexts,
// each with users of that shape, Start of them for an hour, then 1% more
// each minute. The daemon runs with the shipped defaults but for the
// targets' pool and the one scenario they serve, so that production's
// requests are of the use case's shape and their own latencies, read from
// the engines' /metrics, are the truth the signal must lead.
const (
	poolUseCase  = "chatbot"
	poolScenario = "ctx-32k"
	poolStart    = 6
	poolSize     = 3
	poolHold     = time.Hour
	poolGrowth   = 0.01
	poolHorizon  = 4 * time.Hour
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
// scrapes headroom's registry and each engine's /metrics every 15 s of
// virtual time until the horizon. It returns the samples, from virtual
// time 0 at the bubble's start.
func runPool(t *testing.T, cfg *config.Config) []sample {
	var out []sample
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
		servers := make([]*sim.Server, poolSize)
		listeners := map[string]*memnet.Listener{}
		var https []*http.Server
		for i := range servers {
			srv := sim.NewServer(prof, 1, "vllm")
			servers[i] = srv
			ln := memnet.Listen()
			listeners[fmt.Sprintf("sim%d:80", i)] = ln
			hs := &http.Server{Handler: srv.Handler()}
			https = append(https, hs)
			wg.Go(func() { srv.Run(ctx) })
			wg.Go(func() { srv.RunLoad(ctx, load, []sim.Shape{shape}, uint64(i+1)) })
			wg.Go(func() { _ = hs.Serve(ln) })
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
		engines := make([]*scraper, poolSize)
		for i := range engines {
			engines[i] = &scraper{job: "vllm", instance: fmt.Sprintf("sim%d", i)}
		}
		keepEngine := func(name string) bool {
			return name == "vllm:time_to_first_token_seconds" || name == "vllm:inter_token_latency_seconds" || name == "vllm:num_requests_running"
		}
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
			for i, srv := range servers {
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				page, err := exposition.Families(rec.Body, 64<<20, keepEngine)
				if err != nil {
					t.Fatal(err)
				}
				out = engines[i].add(out, page, ts)
			}
		}
		mon.Stop()
		cancel()
		for i, hs := range https {
			_ = hs.Close()
			_ = listeners[fmt.Sprintf("sim%d:80", i)].Close()
		}
		wg.Wait()
	})
	return out
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
// load rising 1% a minute after a steady hour, scrapes headroom and the
// engines every 15 s of virtual time, evaluates `headroom rules`' output
// for the configuration on the series with Prometheus's rule manager, and
// asks that the signal for one more replica
// (pool:headroom_replicas_desired:stabilized above the pool's 3 targets)
// come at least 5 minutes before the first minute in which any replica's
// production requests, on the engine's own histograms, broke a threshold of
// the use case: a mean TTFT over its maximum, or a decode speed (one over
// the mean inter-token time) under its minimum. A minute's mean breaks
// sooner than the use case's 30-minute window does, so the lead is the
// smaller for it. docs/operations.md prints the lead this logs.
//
// It fails as the rules are (docs/operations.md#autoscaling has the run): a
// calibration burst stands in one replica's load at the steady hour's end,
// and the signal it raises is held for the stabilization window.
// HEADROOM_POOL_LEAD=1 runs it.
func TestPoolSignalLeadsTheBreach(t *testing.T) {
	if os.Getenv("HEADROOM_POOL_LEAD") == "" {
		t.Skip("fails: its breach is read from the engines' own histograms, which count headroom's calibration bursts (docs/operations.md#autoscaling); HEADROOM_POOL_LEAD=1 runs it")
	}
	if raceEnabled {
		t.Skip("hours of virtual time: run it without -race")
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
	samples := runPool(t, cfg)
	ev := evaluate(t, samples, ruleFile, poolHorizon)

	// The truth, per replica and minute, from the engines' own histograms.
	var breaches []string
	if u.TTFTMax > 0 {
		breaches = append(breaches, fmt.Sprintf(`rate(vllm:time_to_first_token_seconds_sum[1m]) / rate(vllm:time_to_first_token_seconds_count[1m]) > %g`, u.TTFTMax.Seconds()))
	}
	if u.DecodeMinTPS > 0 {
		breaches = append(breaches, fmt.Sprintf(`rate(vllm:inter_token_latency_seconds_count[1m]) / rate(vllm:inter_token_latency_seconds_sum[1m]) < %g`, u.DecodeMinTPS))
	}
	if u.E2EMax > 0 || u.ITLMax > 0 {
		t.Fatalf("%s has thresholds the engines' histograms do not judge here", u.Name)
	}
	const signal = `pool:headroom_replicas_desired:stabilized{pool="llama"} > pool:headroom_targets:count{pool="llama"}`
	var onset, breach time.Duration = -1, -1
	var table strings.Builder
	fmt.Fprintf(&table, "minute  users  load (each replica)  capacity  lower bound  needed  desired  reason\n")
	for ts := poolHold; ts <= poolHorizon && breach < 0; ts += time.Minute {
		if onset < 0 && len(ev.query(t, signal, ts)) > 0 {
			onset = ts
		}
		for _, q := range breaches {
			if v := ev.query(t, q, ts); len(v) > 0 && breach < 0 {
				breach = ts
				t.Logf("first breach at %s: %s on %s (%.3g)", ts, q, v[0].Metric.Get("instance"), v[0].F)
			}
		}
		if ts%(5*time.Minute) == 0 || ts == onset || ts == breach {
			users := sim.Rising{Start: poolStart, Hold: poolHold.Seconds(), Growth: poolGrowth}.Users(ts.Seconds())
			fmt.Fprintf(&table, "%6.0f  %5d  %s  %s  %s  %6s  %7s  %s\n", ts.Minutes(), users,
				values(ev.query(t, `sort_by_label(headroom_load_requests, "target")`, ts)),
				values(ev.query(t, `sort_by_label(headroom_capacity_requests{use_case="`+poolUseCase+`"}, "target")`, ts)),
				values(ev.query(t, `sort_by_label(headroom_capacity_lower_requests{use_case="`+poolUseCase+`"}, "target")`, ts)),
				values(ev.query(t, `pool_use_case:headroom_replicas_needed:ceil{pool="llama"}`, ts)),
				values(ev.query(t, `pool:headroom_replicas_desired:stabilized{pool="llama"}`, ts)),
				reasons(ev.query(t, `pool_use_case_slo:headroom_replicas_needed:binding{pool="llama"}`, ts)))
		}
	}
	t.Logf("users per replica, replicas needed and desired, each minute from the ramp's start:\n%s", table.String())
	// The signal must come from the rising load, not before it: at the
	// steady hour's end the pool has its estimates and wants no more.
	if v := ev.query(t, `pool:headroom_replicas_desired:stabilized{pool="llama"}`, poolHold); len(v) != 1 || v[0].F > poolSize {
		t.Errorf("at the steady load's end the desired replicas are %v, want at most %d", v, poolSize)
	}
	if v := ev.query(t, `pool_use_case:headroom_replicas_needed:ceil{pool="llama"}`, poolHold); len(v) != 1 {
		t.Errorf("no replicas needed at the steady load's end: the pool has no estimate (%v)", v)
	}
	switch {
	case breach < 0:
		t.Fatalf("no threshold broke within %s: the load never reached the capacity", poolHorizon)
	case onset < 0:
		t.Fatalf("the first breach came at %s (ramp minute %.0f) with no signal for one more replica", breach, (breach - poolHold).Minutes())
	}
	lead := breach - onset
	t.Logf("signal for one more replica at %s (ramp minute %.0f), first breach at %s (ramp minute %.0f): lead %s",
		onset, (onset - poolHold).Minutes(), breach, (breach - poolHold).Minutes(), lead)
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
