package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"

	"github.com/headroom-dev/headroom/internal/golden"
)

func TestLoadGood(t *testing.T) {
	t.Setenv("VLLM_A_KEY", "sk-a")
	c, err := Load("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Targets[0].MetricsURL; got != "http://127.0.0.1:8000/metrics" {
		t.Errorf("default metrics_url = %q", got)
	}
	if c.Targets[0].Engine != "auto" || c.Scenarios[0].Cache != "cold" || c.MaxInFlight != 64 ||
		!c.Calibration.Enabled || c.Calibration.MaxBurst != 64 || c.UseCases[0].CurveWindow != 6*time.Hour {
		t.Errorf("defaults not applied: %+v %+v", c.Targets[0], c.Scenarios[0])
	}
	if c.UseCases[0].TTFTMax != 8*time.Second || c.UseCases[0].Statistic != "p90" {
		t.Errorf("use case = %+v", c.UseCases[0])
	}
}

func TestFilesRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/headroom.yml"
	yml := "targets:\n" +
		"  - {name: a, url: 'http://127.0.0.1:8000/', api_key_file: key, capacity_seed: bench/report.json}\n" +
		"  - {name: b, url: 'http://127.0.0.1:8001/', api_key_file: /run/secrets/key}\n"
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "targets[0].api_key_file") {
		t.Fatalf("Load with the key files missing: %v", err)
	}
	// The key files exist only for this part; /run/secrets is outside the test's reach.
	if err := os.WriteFile(dir+"/key", []byte("k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	c.setDirectory(dir)
	if err := c.checkKeys(); err == nil || strings.Contains(err.Error(), "targets[0]") || !strings.Contains(err.Error(), "targets[1].api_key_file") {
		t.Fatalf("checkKeys: %v, want only targets[1] (its file is missing)", err)
	}
	for _, tc := range []struct{ got, want string }{
		{c.Targets[0].APIKeyFile, dir + "/key"},
		{c.Targets[0].CapacitySeed, dir + "/bench/report.json"},
		{c.Targets[1].APIKeyFile, "/run/secrets/key"},
		{c.Targets[1].CapacitySeed, ""},
	} {
		if tc.got != tc.want {
			t.Errorf("path %q, want %q", tc.got, tc.want)
		}
	}
}

func TestTRTLLMMetricsPath(t *testing.T) {
	c, err := Parse([]byte("targets:\n  - {name: t, url: 'http://127.0.0.1:8000/', engine: trtllm}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Targets[0].MetricsURL; got != "http://127.0.0.1:8000/prometheus/metrics" {
		t.Errorf("trtllm metrics_url = %q", got)
	}
}

func TestDefaultsReproduceReports(t *testing.T) {
	c, err := Parse([]byte("targets: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The reports' contexts; decode speed needs a few tokens, not their
	// 1024, and E2E (code completion's) the use case's full 128.
	want := map[string][2]int{"ctx-1k": {1024, 128}, "ctx-8k": {8192, 32}, "ctx-32k": {32768, 32}, "ctx-64k": {65536, 32}, "ctx-96k": {98304, 32}}
	for _, s := range c.Scenarios {
		if w := want[s.Name]; w != [2]int{s.InputTokens, s.OutputTokens} {
			t.Errorf("scenario %s = %d/%d, want %v", s.Name, s.InputTokens, s.OutputTokens, w)
		}
	}
	if len(c.UseCases) != 5 || c.ProbeBudget != 0.02 {
		t.Errorf("%d use cases, budget %g", len(c.UseCases), c.ProbeBudget)
	}
}

func TestParseErrorsNamePath(t *testing.T) {
	base := "targets:\n  - name: a\n    url: http://127.0.0.1:1\n"
	tests := []struct{ yaml, want string }{
		{"targets:\n  - name: a\n    url: http://127.0.0.1:1\n  - name: b\n    url: 127.0.0.1:8000\n", "targets[1].url: missing scheme"},
		{"targets:\n  - name: a b\n    url: http://h\n", "targets[0].name: must match"},
		{"targets:\n  - name: a\n    url: http://h\n  - name: a\n    url: http://h\n", "targets[1].name: duplicate target"},
		{"targets:\n  - name: a\n    url: http://user:pw@h\n", "targets[0].url: credentials in the URL"},
		{"targets:\n  - name: a\n    url: http://h\n    api: grpc\n", "targets[0].api: must be chat or completions"},
		{"targets:\n  - name: a\n    url: http://h\n    engine: foo\n", "targets[0].engine: unknown engine"},
		{"targets:\n  - name: a\n    url: http://h\n    colour: blue\n", "targets[0].colour: unknown key (line 4); the keys here are name, url,"},
		{base + "probe_budget: 2\n", "probe_budget: must be in [0.001, 1], got 2"},
		{base + "probe_budget: .nan\n", "probe_budget: must be in [0.001, 1], got NaN"},
		{base + "probe_budget: 1e-300\n", "probe_budget: must be in [0.001, 1], got 1e-300"},
		{base + "engine_scrape_interval: 5s\nengine_scrape_timeout: 10s\n", "engine_scrape_timeout: must be in (0, engine_scrape_interval (5s)], got 10s"},
		{"targets:\n  - name: a\n    url: http://h\n    colour: blue\n", "targets[0].colour: unknown key (line 4)"},
		{base + "use_cases:\n  - name: u\n    window: [1]\n", "use_cases[0].window: cannot unmarshal !!seq into time.Duration (line 6)"},
		{base + "probe_budget: lots\n", "probe_budget: cannot unmarshal !!str `lots` into float64 (line 4)"},
		{base + "calibration: {enabled: true, max_burst: 1}\n", "calibration.max_burst: must be in [2, 64], got 1"},
		{base + "max_in_flight: 4\ncalibration: {enabled: true, max_burst: 6}\n", "calibration.max_burst: must not exceed max_in_flight (4), got 6"},
		{base + "max_in_flight: 1\ncalibration: {enabled: true}\n", "calibration.max_burst: must not exceed max_in_flight (1), got 2"},
		{base + "scenarios:\n  - name: s\n    input_tokens: 1024\n    output_tokens: 1\n", "scenarios[0].output_tokens: must be from 2"},
		{base + "scenarios:\n  - name: s\n    input_tokens: 1024\n    output_tokens: 8\n    cache: tepid\n", "scenarios[0].cache: must be cold or warm"},
		{base + "use_cases:\n  - name: u\n    scenario: nope\n    ttft_max: 1s\n", "use_cases[0].scenario: no scenario named \"nope\""},
		{base + "use_cases:\n  - name: u\n    scenario: ctx-1k\n    statistic: p42\n    ttft_max: 1s\n", "use_cases[0].statistic"},
		{base + "use_cases:\n  - name: u\n    scenario: ctx-1k\n", "use_cases[0]: needs at least one of"},
		{base + "scenarios:\n  - name: s\n    input_tokens: 1024\n    output_tokens: 8\n    interval: fast\n", "scenarios[0].interval: cannot unmarshal !!str `fast` into time.Duration (line 8)"},
		{base + "power:\n  source: dcgm\n", "power.dcgm_url: required"},
		{base + "power:\n  source: ipmi\n", "power.source: unknown source"},
		{"discovery:\n  - relabel_configs: []\n", "discovery[0]: needs at least one of file_sd_configs"},
		{"targets:\n  - {name: a, url: 'http://h', scenarios: [ctx-1k, ctx-2k]}\n", `targets[0].scenarios[1]: no scenario named "ctx-2k"`},
		{"discovery:\n  - file_sd_configs: [{files: [a.json]}]\n    target: {scenarios: [x]}\n", `discovery[0].target.scenarios[0]: no scenario named "x"`},
		{"discovery:\n  - consul_sd_configs: [{server: h}]\n", "discovery[0].consul_sd_configs: unknown key (line 2); the keys here are file_sd_configs, http_sd_configs, kubernetes_sd_configs, relabel_configs, target"},
		{"discovery:\n  - file_sd_configs: [{files: [a.json]}]\n    target: {url: http://h}\n", "discovery[0].target.url: comes from relabeling"},
		{"discovery:\n  - file_sd_configs: [{files: [a.json]}]\n    target: {api: grpc}\n", "discovery[0].target.api: must be chat or completions"},
		{"discovery:\n  - file_sd_configs: [{files: [a.json]}]\n    relabel_configs: [{action: explode}]\n", "unknown relabel action \"explode\""},
		{"discovery:\n  - file_sd_configs: [{files: [a.json]}]\n    relabel_configs: [{action: replace, target_label: \"\"}]\n", "discovery[0].relabel_configs[0]: relabel configuration for replace action requires 'target_label'"},
		{"discovery:\n  - kubernetes_sd_configs: [{role: node}]\n", "discovery[0].kubernetes_sd_configs[0].role: must be pod or endpointslice"},
		{"discovery:\n  - file_sd_configs: [{files: [a.txt]}]\n", `path name "a.txt" is not valid for file discovery`},
		// Issue 37: URLs that take paths after them, labels of any size, numbers YAML reads as NaN.
		{"targets:\n  - {name: a, url: 'http://127.0.0.1:9835/-/reload?'}\n", "targets[0].url: a base URL takes no query or fragment"},
		{"targets:\n  - {name: a, url: 'http://h/api?key=1'}\n", "targets[0].url: a base URL takes no query or fragment"},
		{"targets:\n  - {name: a, url: 'http://h/#frag'}\n", "targets[0].url: a base URL takes no query or fragment"},
		{"targets:\n  - {name: " + strings.Repeat("x", 100_000) + ", url: 'http://h'}\n", "targets[0].name: a label value of at most 1024 bytes of UTF-8 is needed, got 100000 bytes"},
		{"targets:\n  - {name: a, url: 'http://h', pool: " + strings.Repeat("p", 2000) + "}\n", "targets[0].pool: a label value of at most 1024 bytes"},
		{"targets:\n  - {name: a, url: 'http://h', model: " + strings.Repeat("m", 2000) + "}\n", "targets[0].model: a label value of at most 1024 bytes"},
		{base + "scenarios:\n  - name: s\n    input_tokens: 4611686018427387904\n    output_tokens: 8\n", "scenarios[0].input_tokens: must be from 16 to 16777216, got 4611686018427387904"},
		{base + "scenarios:\n  - name: s\n    input_tokens: 1024\n    output_tokens: 16777217\n", "scenarios[0].output_tokens: must be from 2 (ITL needs two tokens) to 16777216"},
		{base + "use_cases:\n  - name: u\n    scenario: ctx-1k\n    decode_min_tps: .nan\n", "use_cases[0].decode_min_tps: must be a number from 0 to 1e+06, got NaN"},
		{base + "use_cases:\n  - name: u\n    scenario: ctx-1k\n    decode_min_tps: .inf\n", "use_cases[0].decode_min_tps: must be a number from 0 to 1e+06, got +Inf"},
		{base + "autoscaling: {headroom: 1}\n", "autoscaling.headroom: must be in [0, 0.9], got 1"},
		{base + "autoscaling: {headroom: .nan}\n", "autoscaling.headroom: must be in [0, 0.9], got NaN"},
		{base + "autoscaling: {scale_down_stabilization: 30s}\n", "autoscaling.scale_down_stabilization: must be whole minutes, at least 1m, got 30s"},
		{base + "autoscaling: {scale_down_stabilization: 90s}\n", "autoscaling.scale_down_stabilization: must be whole minutes, at least 1m, got 1m30s"},
		// Issue 38: limits on the targets probed.
		{base + "max_targets: -1\n", "max_targets: must not be negative, got -1"},
		{"targets:\n  - {name: a, url: 'http://h'}\n  - {name: b, url: 'http://h'}\nmax_targets: 1\n", "max_targets: the 2 static targets exceed it (1): raise it, or shard"},
		{"discovery:\n  - file_sd_configs: [{files: [a.json]}]\n    max_targets: -5\n", "discovery[0].max_targets: must not be negative, got -5"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q)\n got error %v\nwant one containing %q", tc.yaml, err, tc.want)
		}
	}
}

func TestDiscoveryParses(t *testing.T) {
	c, err := Parse([]byte(`
discovery:
  - file_sd_configs: [{files: [targets/*.json], refresh_interval: 1m}]
    http_sd_configs: [{url: http://127.0.0.1:9/sd}]
    kubernetes_sd_configs: [{role: pod, namespaces: {names: [llm]}}]
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_instance]
        target_label: pool
    target: {engine: vllm, model: llama, pool: default}
`))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Discovery[0]
	if n := len(d.Configs()); n != 3 {
		t.Errorf("%d mechanisms, want 3", n)
	}
	if got := d.FileSDConfigs[0].RefreshInterval.String(); got != "1m" {
		t.Errorf("file_sd refresh_interval = %s", got)
	}
	if got := d.HTTPSDConfigs[0].RefreshInterval.String(); got != "1m" {
		t.Errorf("http_sd refresh_interval = %s, want Prometheus's default 1m", got)
	}
	if got := d.KubernetesSDConfigs[0].NamespaceDiscovery.Names; len(got) != 1 || got[0] != "llm" {
		t.Errorf("kubernetes namespaces = %v", got)
	}
	if r := d.RelabelConfigs[0]; r.TargetLabel != "pool" || r.Action != "replace" || r.Regex.String() != "(.*)" {
		t.Errorf("relabel config without its defaults: %+v", r)
	}
	if d.Target.API != "chat" || d.Target.HTTPClientConfig.FollowRedirects != true {
		t.Errorf("template without defaults: %+v", d.Target)
	}
}

func TestScenariosOf(t *testing.T) {
	c, err := Parse([]byte("targets:\n  - {name: a, url: 'http://h', scenarios: [ctx-96k, ctx-1k]}\n  - {name: b, url: 'http://h'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.ScenariosOf(c.Targets[0]) {
		got = append(got, s.Name)
	}
	if strings.Join(got, " ") != "ctx-1k ctx-96k" {
		t.Errorf("a probes %v, want ctx-1k ctx-96k in the configuration's order", got)
	}
	if len(c.ScenariosOf(c.Targets[1])) != 5 || !c.Targets[1].Probes("ctx-8k") || c.Targets[0].Probes("ctx-8k") {
		t.Error("a target without scenarios must probe all, one with them only those")
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	t.Setenv("HEADROOM_TEST_KEY", "  sk-from-env \n")
	k, err := Target{Name: "a", APIKeyEnv: "HEADROOM_TEST_KEY"}.APIKey()
	if err != nil || k != "sk-from-env" {
		t.Fatalf("env key = %q, %v", k, err)
	}
	f := t.TempDir() + "/key"
	if err := os.WriteFile(f, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := (Target{Name: "a", APIKeyFile: f}).APIKey(); err != nil || k != "sk-from-file" {
		t.Fatalf("file key = %q, %v", k, err)
	}
	_, err = Target{Name: "a", APIKeyEnv: "HEADROOM_TEST_UNSET"}.APIKey()
	if err == nil || !strings.Contains(err.Error(), "HEADROOM_TEST_UNSET is not set") {
		t.Fatalf("unset env: %v", err)
	}
}

// A key that cannot be read fails the load, naming the field: the target
// would otherwise be disabled with nothing but a log line.
func TestLoadChecksKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/empty", []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HEADROOM_TEST_SET_KEY", "sk-1")
	tests := []struct{ target, want string }{
		{"{name: a, url: http://h, api_key_file: missing}", "targets[0].api_key_file: target a: read api_key_file: open " + dir + "/missing: no such file"},
		{"{name: a, url: http://h, api_key_file: empty}", "targets[0].api_key_file: the key is empty"},
		{"{name: a, url: http://h, api_key_env: HEADROOM_TEST_UNSET_KEY}", "targets[0].api_key_env: target a: api_key_env HEADROOM_TEST_UNSET_KEY is not set"},
		{"{name: a, url: http://h, api_key_env: HEADROOM_TEST_SET_KEY}", ""},
		{"{name: a, url: https://h, http_client_config: {tls_config: {ca_file: ca.pem}}}", "targets[0].http_client_config.tls_config.ca_file: open " + dir + "/ca.pem: no such file"},
	}
	for _, tc := range tests {
		path := dir + "/headroom.yml"
		if err := os.WriteFile(path, []byte("targets:\n  - "+tc.target+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.target, err, tc.want)
		}
	}
}

// FuzzParse: no file, however broken, panics the loader; a file it accepts
// validates again and keeps the budget in range.
func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/good.yml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("targets:\n  - {name: a, url: 'http://h', gpus: 3}\nprobe_budget: .nan\n"))
	f.Add([]byte("use_cases:\n  - name: u\n    window: [1]\n"))
	f.Add([]byte("scenarios: {a: 1}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted, then invalid: %v", err)
		}
		if !(c.ProbeBudget >= MinProbeBudget && c.ProbeBudget <= 1) {
			t.Fatalf("accepted probe_budget %g", c.ProbeBudget)
		}
	})
}

// A use case whose curve window cannot hold enough probes of its scenario
// is warned about with its fix, and the fix silences the warning.
func TestWarningsNeverAnEstimate(t *testing.T) {
	tests := []struct {
		cfg, want string
	}{
		{"targets: [{name: a, url: 'http://h'}]\n", ""},
		{"targets: [{name: a, url: 'http://h'}]\ncalibration: {enabled: false}\n",
			"targets[0] (a): never gets a capacity estimate, only lower bounds: calibration is disabled and it has no capacity_seed; set calibration.enabled: true or targets[0].capacity_seed to a `headroom bench` report.json of the server"},
	}
	for _, tc := range tests {
		c, err := Parse([]byte(tc.cfg))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(c.Warnings(), "\n"); got != tc.want {
			t.Errorf("%q: warnings %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

// Secrets lists every credential a target sends, for redaction.
func TestTargetSecrets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/cred", []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte("targets:\n  - name: a\n    url: http://h\n    http_client_config: {authorization: {credentials_file: cred}}\n" +
		"  - name: b\n    url: http://h\n    http_client_config: {basic_auth: {username: u, password: pw-inline}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.setDirectory(dir)
	if got := strings.Join(append(c.Targets[0].Secrets(), c.Targets[1].Secrets()...), ","); got != "from-file,pw-inline" {
		t.Errorf("secrets %q", got)
	}
	if _, err := Parse([]byte("targets:\n  - name: a\n    url: http://h\n    api_key_env: K\n    http_client_config: {authorization: {credentials: x}}\n")); err == nil ||
		!strings.Contains(err.Error(), "targets[0].http_client_config: sets credentials and so does api_key_file or api_key_env") {
		t.Errorf("both credentials: %v", err)
	}
	if _, err := Parse([]byte("targets:\n  - name: a\n    url: http://h\n    http_client_config: {tls_config: {colour: blue}}\n")); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("unknown field inside http_client_config: %v", err)
	}
}

// Calibration is on by default, and a file can turn it off; the curve
// window defaults to six hours and may not be shorter than the window.
func TestCalibrationAndCurveWindowDefaults(t *testing.T) {
	for _, tc := range []struct {
		yaml    string
		enabled bool
		err     string
	}{
		{"targets: []\n", true, ""},
		{"targets: []\ncalibration: {max_burst: 4}\n", true, ""},
		{"targets: []\ncalibration: {enabled: false}\n", false, ""},
		{"targets: []\nscenarios: [{name: s, input_tokens: 64, output_tokens: 8}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s, window: 1h, curve_window: 30m}]\n", true,
			"use_cases[0].curve_window: must be at least the window (1h0m0s), got 30m0s"},
	} {
		c, err := Parse([]byte(tc.yaml))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.Calibration.Enabled != tc.enabled {
			t.Errorf("%q: calibration enabled = %v, want %v", tc.yaml, c.Calibration.Enabled, tc.enabled)
		}
	}
}

// A headroom left out is 20%; one written as 0 stays 0 (nothing kept free).
func TestAutoscalingDefaults(t *testing.T) {
	for _, tc := range []struct {
		yaml     string
		headroom float64
		window   time.Duration
	}{
		{"targets: []\n", 0.2, 15 * time.Minute},
		{"targets: []\nautoscaling: {headroom: 0}\n", 0, 15 * time.Minute},
		{"targets: []\nautoscaling: {headroom: 0.3, scale_down_stabilization: 1h}\n", 0.3, time.Hour},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.Autoscaling.Headroom != tc.headroom || c.Autoscaling.ScaleDownStabilization != tc.window {
			t.Errorf("%q: autoscaling %+v, want headroom %g and stabilization %s", tc.yaml, c.Autoscaling, tc.headroom, tc.window)
		}
	}
}

// Secrets covers every credential an http_client_config holds beyond the
// auth schemes: header secrets and files, a proxy URL's password and
// proxy_connect_header; a metrics page on another host gets the headers'
// plain values only.
func TestTargetSecretsBeyondAuthorization(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/hdr", []byte("hdr-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(`targets:
  - name: a
    url: http://h
    http_client_config:
      proxy_url: http://user:proxy-pw-1@proxy:3128
      proxy_connect_header: {X-Proxy-Key: [proxy-hdr-2]}
      http_headers:
        X-Api-Key: {secrets: [hdr-inline-3], files: [hdr]}
        X-Team: {values: [plain-team]}
`))
	if err != nil {
		t.Fatal(err)
	}
	c.setDirectory(dir)
	got := c.Targets[0].Secrets()
	for _, want := range []string{"proxy-pw-1", "proxy-hdr-2", "hdr-inline-3", "hdr-from-file"} {
		if !slices.Contains(got, want) {
			t.Errorf("secrets %q lack %q", got, want)
		}
	}
	if slices.Contains(got, "plain-team") {
		t.Errorf("secrets %q hold a plain header value", got)
	}
	plain := WithoutCredentials(c.Targets[0].HTTPClientConfig).HTTPHeaders.Headers
	if len(plain) != 1 || plain["X-Team"].Values[0] != "plain-team" {
		t.Errorf("headers for another host: %+v", plain)
	}
	if err := c.checkKeys(); err != nil {
		t.Errorf("check files: %v", err)
	}
	c.Targets[0].HTTPClientConfig.HTTPHeaders.Headers["X-Api-Key"] = promconfig.Header{Files: []string{dir + "/missing"}}
	if err := c.checkKeys(); err == nil || !strings.Contains(err.Error(), "targets[0].http_client_config.http_headers.X-Api-Key.files[0]") {
		t.Errorf("a missing header file: %v", err)
	}
}

// A base URL ending in /v1 is valid, and warned of: every path joined
// after it would start /v1/v1.
func TestV1BaseURLWarns(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://h:8000/v1", "targets[0].url: http://h:8000/v1 ends in /v1, and headroom adds /v1/models and /v1/chat/completions itself: requests would go to /v1/v1/...; give the server's root, http://h:8000"},
		{"http://h:8000/v1/", "targets[0].url: http://h:8000/v1/ ends in /v1"},
		{"http://h:8000/openai/v1", "ends in /v1, and headroom adds /v1/models and /v1/chat/completions itself: requests would go to /v1/v1/...; give the server's root, http://h:8000/openai"},
		{"http://h:8000", ""},
		{"http://h:8000/v10", ""},
	} {
		c, err := Parse([]byte(fmt.Sprintf("targets: [{name: a, url: %q}]\n", tc.url)))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(c.Warnings(), "\n")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: warnings %q, want %q", tc.url, got, tc.want)
		}
	}
	c, err := Parse([]byte("targets: [{name: a, url: 'http://h/prefix/'}]\n"))
	if err != nil || c.Targets[0].MetricsURL != "http://h/prefix/metrics" {
		t.Errorf("metrics_url joined to a base with a path: %v %v", c, err)
	}
}

// What an operator reads for the mistakes a first configuration makes
// (issue 39): each file under testdata/messages gives its error, or its
// warnings, as a golden file beside it. The messages name YAML keys and
// lines only, never a Go type.
func TestMessagesGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/messages/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no messages to check: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var got string
			if c, err := Load(f); err != nil {
				got = "error: " + err.Error() + "\n"
			} else {
				for _, w := range c.Warnings() {
					got += "warning: " + w + "\n"
				}
			}
			if strings.Contains(got, "config.") || strings.Contains(got, "type ") {
				t.Errorf("message names a Go type: %s", got)
			}
			golden.Check(t, strings.TrimSuffix(f, ".yml")+".txt", []byte(got))
		})
	}
}

// nearest offers a known key only for a slip, not for any word.
func TestNearestKey(t *testing.T) {
	known := []string{"name", "url", "api", "api_key_env", "api_key_file", "metrics_url", "gpus"}
	for _, tc := range []struct{ key, want string }{
		{"api_key_evn", "api_key_env"}, {"apiKeyFile", "api_key_file"}, {"API-KEY-ENV", "api_key_env"},
		{"gpu", "gpus"}, {"nmae", "name"}, {"metric_url", "metrics_url"},
		{"colour", ""}, {"x", ""}, {"port", ""},
	} {
		if got := nearest(tc.key, known); got != tc.want {
			t.Errorf("nearest(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// A burst's longer probes keep a deadline that fits them: the derived one
// follows the tokens, and a configured one grows by the same allowance for
// each token more.
func TestWithOutputKeepsTheDeadlineFitting(t *testing.T) {
	for _, c := range []struct {
		name string
		sc   Scenario
		n    int
		want time.Duration
	}{
		{"derived", Scenario{InputTokens: 8192, OutputTokens: 32}, 512, 30*time.Second + 8192*time.Millisecond + 512*100*time.Millisecond},
		{"configured", Scenario{InputTokens: 8192, OutputTokens: 32, Timeout: 20 * time.Second}, 512, 20*time.Second + 480*100*time.Millisecond},
		{"configured, fewer tokens", Scenario{InputTokens: 8192, OutputTokens: 32, Timeout: 20 * time.Second}, 16, 20 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.sc.WithOutput(c.n)
			if got.OutputTokens != c.n || got.ProbeTimeout() != c.want {
				t.Errorf("WithOutput(%d) = %d tokens, deadline %v; want %d and %v", c.n, got.OutputTokens, got.ProbeTimeout(), c.n, c.want)
			}
		})
	}
}
