// Package alerts holds headroom's Prometheus rules; its tests run promtool and
// check the rules against the metric contract (internal/contract).
package alerts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/promqltest"
	"go.yaml.in/yaml/v3"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/contract"
)

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found; .ci/run installs Debian's prometheus package")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	return p
}

func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "headroom.rules.yml"}, {"test", "rules", "headroom.rules.test.yml", "autoscaling.rules.test.yml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestRulesUseOnlyContractMetrics(t *testing.T) {
	b, err := os.ReadFile("headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules := string(b)
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`record: (\S+)`).FindAllStringSubmatch(rules, -1) {
		recorded[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`[a-z_:]*headroom[_:][a-z0-9_:]+`).FindAllString(rules, -1) {
		if recorded[m] {
			continue
		}
		if !contract.Has(m) {
			t.Errorf("%s is neither in the metric contract nor a recording rule", m)
		}
	}
}

func TestEveryAlertHasARunbook(t *testing.T) {
	rules, err := os.ReadFile("headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	book, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(string(book), "## "+m[1]) {
			t.Errorf("alert %s has no section in docs/runbooks.md", m[1])
		}
	}
	for _, a := range regexp.MustCompile(`runbook_url: \S+#(\S+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(strings.ToLower(string(book)), "## "+a[1]) {
			t.Errorf("runbook anchor #%s matches no heading", a[1])
		}
	}
}

// The shipped rules are `headroom rules`' output for the default
// configuration.
func TestShippedRulesAreTheDefaults(t *testing.T) {
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Rules(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("headroom.rules.yml is not the defaults' rules: go run ./cmd/headroom rules > alerts/headroom.rules.yml")
	}
}

// A configuration with other use cases gets rules for them: promtool checks
// them, and its unit test evaluates the generated error ratios, including
// thresholds that are no bucket bound (7 s TTFT reads le="5"; 12 tokens/s
// reads le="15").
func TestRulesForACustomConfig(t *testing.T) {
	bin := promtool(t)
	cfg, err := config.Parse([]byte(`
scenarios: [{name: ctx-16k, input_tokens: 16384, output_tokens: 64}]
use_cases:
  - {name: summarize, scenario: ctx-16k, ttft_max: 7s, decode_min_tps: 12}
  - {name: agent-loop, scenario: ctx-16k, itl_max: 50ms}
autoscaling: {headroom: 0.3, scale_down_stabilization: 1h}
`))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := Rules(cfg, Options{Job: "llm-headroom"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`le="5"`, `le="15"`, `le="0.05"`, `use_case: agent-loop`, `up{job="llm-headroom"}`,
		"# summarize, ttft_seconds: threshold 7 is no bucket bound: probes above 5 count as errors",
		"<= bool 0.7)", "/ 0.7\n", "max_over_time(pool:headroom_replicas_desired:max[1h])", "with 30% free"} {
		if !bytes.Contains(rules, []byte(want)) {
			t.Errorf("rules lack %s", want)
		}
	}
	dir := t.TempDir()
	const unit = `rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # every probe's TTFT above 5 s, three in four decode at or below 15 tok/s
      - series: 'headroom_probe_ttft_seconds_bucket{target="a",scenario="ctx-16k",le="5"}'
        values: "0x60"
      - series: 'headroom_probe_ttft_seconds_count{target="a",scenario="ctx-16k"}'
        values: "0+4x60"
      - series: 'headroom_probe_decode_tokens_per_second_bucket{target="a",scenario="ctx-16k",le="15"}'
        values: "0+3x60"
      - series: 'headroom_probe_decode_tokens_per_second_count{target="a",scenario="ctx-16k"}'
        values: "0+4x60"
    promql_expr_test:
      - expr: headroom:slo_latency_errors:ratio_rate30m
        eval_time: 40m
        exp_samples:
          - labels: 'headroom:slo_latency_errors:ratio_rate30m{target="a",use_case="summarize",slo="ttft_seconds"}'
            value: 1
      - expr: headroom:slo_decode_errors:ratio_rate30m
        eval_time: 40m
        exp_samples:
          - labels: 'headroom:slo_decode_errors:ratio_rate30m{target="a",use_case="summarize",slo="decode_tokens_per_second"}'
            value: 0.75
`
	for name, body := range map[string][]byte{"rules.yml": rules, "unit.yml": []byte(unit)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "unit.yml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// With probe_histograms: native the error ratios read the fraction below
// the threshold itself from the native histograms, threshold bucket or not.
// Debian's promtool (2.42) reads no native histograms: Prometheus's own
// PromQL engine evaluates the generated expressions.
func TestRulesForNativeHistograms(t *testing.T) {
	cfg, err := config.Parse([]byte(`
probe_histograms: native
scenarios: [{name: ctx-16k, input_tokens: 16384, output_tokens: 64}]
use_cases: [{name: summarize, scenario: ctx-16k, ttft_max: 7s, decode_min_tps: 12}]
`))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := Rules(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rules, []byte("_bucket")) {
		t.Error("native rules read classic buckets")
	}
	var doc struct {
		Groups []struct {
			Rules []struct{ Record, Expr string }
		}
	}
	if err := yaml.Unmarshal(rules, &doc); err != nil {
		t.Fatal(err)
	}
	expr := map[string]string{}
	for _, r := range doc.Groups[0].Rules {
		expr[r.Record] = strings.TrimSpace(r.Expr)
	}
	// Every TTFT in (8, 16] s; three decode speeds in (4, 8] tok/s and one
	// in (16, 32]: a quarter meet the 12 tok/s minimum, none the 7 s TTFT.
	promqltest.RunTest(t, `
load 1m
  headroom_probe_ttft_seconds{target="a",scenario="ctx-16k"} {{schema:0 sum:40 count:4 offset:4 buckets:[4]}}+{{schema:0 sum:40 count:4 offset:4 buckets:[4]}}x60
  headroom_probe_decode_tokens_per_second{target="a",scenario="ctx-16k"} {{schema:0 sum:40 count:4 offset:3 buckets:[3 0 1]}}+{{schema:0 sum:40 count:4 offset:3 buckets:[3 0 1]}}x60

eval instant at 40m `+expr["headroom:slo_latency_errors:ratio_rate30m"]+`
  {target="a"} 1

eval instant at 40m `+expr["headroom:slo_decode_errors:ratio_rate30m"]+`
  {target="a"} 0.75
`, promqltest.NewTestEngine(t, false, 0, 10000))
}
