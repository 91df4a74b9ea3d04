// Package e2e runs headroom demo under a real Prometheus server with the
// alert rules loaded, and evaluates every dashboard query and every rule
// through Prometheus's HTTP API, as Grafana and the ruler would.
package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// deadline bounds the wait for every panel to fill. The demo, as shipped,
// promises a capacity for every use case within 3 minutes; energy per
// token needs five.
const deadline = 6 * time.Minute

// useCases is how many use cases the demo's default configuration has.
const useCases = 5

func TestDemoUnderPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus not installed: .ci/run installs Debian's package")
		}
		t.Skip("prometheus not installed (apt-get install prometheus); .ci/run installs it")
	}
	if testing.Short() {
		t.Skip("minutes long")
	}
	dir := t.TempDir()
	bin := headroomBinary(t)
	demoAddr, promAddr := freePort(t), freePort(t)
	start(t, filepath.Join(dir, "demo.log"), bin, "demo", "--web.listen-address="+demoAddr, "--log.level=warn")
	// The dashboards' engine panels read the simulator's own metrics, as
	// Prometheus scrapes an inference server directly.
	demoLog, _ := os.ReadFile(filepath.Join(dir, "demo.log"))
	m := regexp.MustCompile(`simulator:\s+http://(\S+)`).FindSubmatch(demoLog)
	if m == nil {
		t.Fatalf("the demo printed no simulator URL:\n%s", demoLog)
	}
	simAddr := string(m[1])

	rules, err := filepath.Abs("../alerts/headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files: [%q]
scrape_configs:
  - job_name: headroom
    static_configs:
      - targets: [%q]
  - job_name: engine
    static_configs:
      - targets: [%q]
`, rules, demoAddr, simAddr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, filepath.Join(dir, "prometheus.log"), prom, "--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	api := "http://" + promAddr + "/api/v1/"

	queries := dashboardQueries(t)
	end := time.Now().Add(deadline)
	// Wait until every panel has data or the deadline: the capacity panels
	// need enough probes at several loads, energy per token five minutes.
	var problems []string
	for {
		final := time.Now().After(end)
		problems = problems[:0]
		if n := len(instant(t, api, `headroom_probes_total{result="success"} > 0`)); n == 0 {
			problems = append(problems, "no successful probe scraped yet")
		}
		qp, empty := checkQueries(t, api, queries, final)
		problems = append(problems, qp...)
		// Each use case needs a number: a capacity, or while the data
		// cannot place it, its lower bound (docs/capacity-model.md); free
		// requests and headroom wherever there is a capacity.
		known := `headroom_capacity_requests == headroom_capacity_requests or headroom_capacity_lower_requests >= 1`
		if n := len(instant(t, api, known)); n < useCases {
			problems = append(problems, fmt.Sprintf("%d of %d use cases have a capacity or a lower bound", n, useCases))
		}
		for _, m := range []string{"headroom_free_requests", "headroom_ratio"} {
			if n, c := len(instant(t, api, m)), len(instant(t, api, "headroom_capacity_requests == headroom_capacity_requests")); n < c || n == 0 {
				problems = append(problems, fmt.Sprintf("%s: %d use cases have it, %d a capacity", m, n, c))
			}
		}
		problems = append(problems, checkRules(t, api)...)
		if (len(problems) == 0 && empty == 0) || final {
			break
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	checkStatusPage(t, demoAddr, dir)
	if t.Failed() {
		for _, log := range []string{"demo.log", "prometheus.log"} {
			b, _ := os.ReadFile(filepath.Join(dir, log))
			t.Logf("%s (tail):\n%s", log, tail(b, 3000))
		}
	}
}

// query is one dashboard panel target.
type query struct{ dashboard, panel, expr string }

// dashboardQueries reads every target expression of the committed dashboards,
// with Grafana's variables replaced as Grafana would with "All" selected.
func dashboardQueries(t *testing.T) []query {
	files, err := filepath.Glob("../dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "30s", "$target", ".*", "$scenario", ".*", "$use_case", ".*", "$pool", ".*")
	var out []query
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, query{filepath.Base(f), p.Title, vars.Replace(tg.Expr)})
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d dashboard queries found: has the JSON layout changed?", len(out))
	}
	return out
}

// metricName finds the exported metrics a query reads; in a recorded
// series (pool_use_case:headroom_free_requests:sum) the one it is made of.
var metricName = regexp.MustCompile(`\bheadroom_[a-z_]*[a-z]`)

// checkQueries runs each query: one that errors is a problem. A panel whose
// queries all come back empty is a problem when every metric they read has
// series, that is where the demo produces its data. (A single empty target
// can be right: the ITL threshold line of a configuration without itl_max.)
func checkQueries(t *testing.T, api string, qs []query, final bool) (out []string, empty int) {
	type panel struct {
		empty   bool
		exprs   []string
		metrics []string
	}
	panels := map[string]*panel{}
	var order []string
	for _, q := range qs {
		key := q.dashboard + " / " + q.panel
		p := panels[key]
		if p == nil {
			p = &panel{empty: true}
			panels[key] = p
			order = append(order, key)
		}
		p.exprs = append(p.exprs, q.expr)
		p.metrics = append(p.metrics, metricName.FindAllString(q.expr, -1)...)
		res, err := instantErr(api, q.expr)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %s: %v", key, q.expr, err))
			continue
		}
		if len(res) > 0 {
			p.empty = false
		}
	}
	for _, key := range order {
		p := panels[key]
		if !p.empty {
			continue
		}
		empty++
		fed := true
		for _, m := range p.metrics {
			m = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
			if len(instant(t, api, fmt.Sprintf(`{__name__=~"%s(_bucket|_sum|_count)?"}`, m))) == 0 {
				fed = false
			}
		}
		if fed {
			out = append(out, fmt.Sprintf("%s: empty though the demo exports its metrics: %s", key, strings.Join(p.exprs, " ; ")))
		} else if final {
			t.Logf("%s: still empty, and the demo has not exported some metric it reads", key)
		}
	}
	return out, empty
}

// checkRules asks Prometheus for the health of every rule: each must have
// been evaluated, without error.
func checkRules(t *testing.T, api string) []string {
	var r struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	get(t, api+"rules", &r)
	var out []string
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				out = append(out, fmt.Sprintf("rule %s/%s: health %s %s", g.Name, rule.Name, rule.Health, rule.LastError))
			}
		}
	}
	if n == 0 {
		out = append(out, "Prometheus loaded no rules")
	}
	sort.Strings(out)
	return out
}

func instant(t *testing.T, api, q string) []json.RawMessage {
	res, err := instantErr(api, q)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	return res
}

func instantErr(api, q string) ([]json.RawMessage, error) {
	resp, err := http.Get(api + "query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	return r.Data.Result, nil
}

func get(t *testing.T, u string, v any) {
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// start runs a process for the test's lifetime, its output in a log file,
// and waits until it is ready at its listen address (the flag's value).
func start(t *testing.T, logPath, bin string, args ...string) {
	t.Helper()
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
	})
	var addr string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			addr = v
		}
	}
	// Both answer /-/ready with 200 once they serve; Prometheus listens
	// earlier and answers 503 until its storage is up.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("%s not ready on %s:\n%s", bin, addr, tail(b, 2000))
}

// freePort returns a loopback address nothing listens on right now.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
