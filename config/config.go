// Package config loads, defaults and validates headroom's YAML configuration.
// Validation errors name the offending field by its path (targets[1].url) so an
// operator can fix a file without reading the code.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	promconfig "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"

	"github.com/headroom-dev/headroom/internal/contract"
)

// Config is the whole configuration file.
type Config struct {
	Targets []Target `yaml:"targets"`
	// Discovery finds more targets as Prometheus finds scrape targets.
	Discovery   []Discovery `yaml:"discovery"`
	Scenarios   []Scenario  `yaml:"scenarios"`
	UseCases    []UseCase   `yaml:"use_cases"`
	Power       Power       `yaml:"power"`
	ProbeBudget float64     `yaml:"probe_budget"`
	// MaxInFlight caps probes in flight across all targets.
	MaxInFlight int `yaml:"max_in_flight"`
	// EngineScrapeInterval is how often each target's own /metrics is read,
	// EngineScrapeTimeout how long one read may take (default: the interval).
	EngineScrapeInterval time.Duration `yaml:"engine_scrape_interval"`
	EngineScrapeTimeout  time.Duration `yaml:"engine_scrape_timeout"`
	Calibration          Calibration   `yaml:"calibration"`
	// ProbeHistograms is what the probe histograms carry: "both" classic
	// buckets and native ones, or "native" only, for a fleet whose classic
	// buckets would make /metrics too large (docs/operations.md).
	ProbeHistograms string `yaml:"probe_histograms"`
	// MaxTargets is the most targets this replica probes, static and
	// discovered (DefaultMaxTargets when unset); the rest are counted in
	// headroom_targets{state="over_limit"}.
	MaxTargets int `yaml:"max_targets"`
	// Autoscaling is what `headroom rules` writes the pools' replica rules
	// with; the daemon itself does not read it.
	Autoscaling Autoscaling `yaml:"autoscaling"`
}

// Autoscaling sets the per-pool replica rules (docs/operations.md#autoscaling).
type Autoscaling struct {
	// Headroom is the share of each replica's capacity (its lower bound)
	// kept free: the replicas needed are those that carry the pool's load
	// within the rest.
	Headroom float64 `yaml:"headroom"`
	// ScaleDownStabilization is how long one replica fewer must have been
	// safe before the desired replicas drop: what keeps the signal from
	// flapping with a load that comes and goes.
	ScaleDownStabilization time.Duration `yaml:"scale_down_stabilization"`
}

// DefaultMaxTargets is the size one replica is measured at in
// docs/operations.md: a fleet larger than it is sharded (--shard.count) or
// raises max_targets. An http_sd list of 100,000 targets, all probed,
// took a replica past 4.6 GB in 20 s.
const DefaultMaxTargets = 1000

// Calibration lets the daemon send bursts of concurrent probes of a use
// case's scenario while its capacity is unknown for want of load spread,
// within the probe budget.
type Calibration struct {
	Enabled  bool `yaml:"enabled"`
	MaxBurst int  `yaml:"max_burst"`
}

// Target is one OpenAI-compatible inference server.
type Target struct {
	Name       string   `yaml:"name"`
	URL        string   `yaml:"url"`
	API        string   `yaml:"api"`
	Model      string   `yaml:"model"`
	APIKeyFile string   `yaml:"api_key_file"`
	APIKeyEnv  string   `yaml:"api_key_env"`
	MetricsURL string   `yaml:"metrics_url"`
	Engine     string   `yaml:"engine"`
	GPUs       []string `yaml:"gpus"`
	// Pool groups the targets that serve one deployment, so that rules
	// can sum their capacity.
	Pool string `yaml:"pool"`
	// Scenarios are the scenarios probed on this target, and so the use
	// cases estimated for it; empty for all. A large fleet probes each
	// deployment at the context lengths it serves.
	Scenarios []string `yaml:"scenarios"`
	// CapacitySeed is a `headroom bench` report.json of this server: its
	// measured curves carry the capacity estimate until probes can.
	CapacitySeed string `yaml:"capacity_seed"`
	// HTTPClientConfig is Prometheus's HTTP client configuration: TLS (CA,
	// client certificate), authorization with credentials_file, proxy,
	// redirects, headers. api_key_file and api_key_env are its shorthand
	// for a bearer key.
	HTTPClientConfig promconfig.HTTPClientConfig `yaml:"http_client_config"`
}

// Scenario is one kind of synthetic probe: a context length and an output length.
type Scenario struct {
	Name         string        `yaml:"name"`
	InputTokens  int           `yaml:"input_tokens"`
	OutputTokens int           `yaml:"output_tokens"`
	Interval     time.Duration `yaml:"interval"`
	Timeout      time.Duration `yaml:"timeout"`
	Cache        string        `yaml:"cache"`
}

// UseCase is a set of thresholds judged on one scenario's probes.
type UseCase struct {
	Name      string        `yaml:"name"`
	Scenario  string        `yaml:"scenario"`
	Statistic string        `yaml:"statistic"`
	Window    time.Duration `yaml:"window"`
	// CurveWindow is how far back probes feed the load-response curves:
	// the curves describe the server, not the moment, and bursts are too
	// dear to repeat every window. Forgotten when the server restarts.
	CurveWindow  time.Duration `yaml:"curve_window"`
	TTFTMax      time.Duration `yaml:"ttft_max"`
	E2EMax       time.Duration `yaml:"e2e_max"`
	DecodeMinTPS float64       `yaml:"decode_min_tps"`
	ITLMax       time.Duration `yaml:"itl_max"`
	// OutputTokens is how many tokens a request of the use case generates,
	// as the reports' "N concurrent requests" run it (1024 for their
	// chatbots); the probes may generate fewer, which measure the decode's
	// speed as well and cost less. Default: the scenario's output_tokens.
	OutputTokens int `yaml:"output_tokens"`
}

// Power selects where GPU power readings come from.
type Power struct {
	Source  string `yaml:"source"`
	DCGMURL string `yaml:"dcgm_url"`
}

// MaxTokens bounds a context or output length, here and in bench reports:
// a prompt is built of that many tokens' words, and 2^62 filled memory.
const MaxTokens = 1 << 24

// maxDecodeTPS bounds decode_min_tps: no stream decodes a million tokens a
// second.
const maxDecodeTPS = 1e6

// MinProbeBudget is the smallest probe_budget: 0.1% of a target's time.
const MinProbeBudget = 0.001

var (
	nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	// A target's name may also be an address (10.0.0.7:8000), the name
	// discovery gives by default, or a pod's namespace/name.
	targetNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.:/-]+$`)
)

// Load reads and validates a configuration file.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.setDirectory(filepath.Dir(path))
	if err := c.checkKeys(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// checkKeys reads every target's API key once, so that a missing file or an
// unset variable fails check-config and a reload instead of silently
// disabling the target. The keys are read again when targets start.
func (c *Config) checkKeys() error {
	var errs []error
	for i, t := range c.Targets {
		errs = append(errs, t.checkFiles(fmt.Sprintf("targets[%d]", i)))
	}
	for i, d := range c.Discovery {
		errs = append(errs, d.Target.checkFiles(fmt.Sprintf("discovery[%d].target", i)))
	}
	return errors.Join(errs...)
}

// checkFiles reads the target's key and opens the files its HTTP client
// reads; errors name their field under path.
func (t Target) checkFiles(path string) error {
	var errs []error
	field := "api_key_file"
	if t.APIKeyEnv != "" {
		field = "api_key_env"
	}
	key, err := t.APIKey()
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("%s.%s: %w", path, field, err))
	case key == "" && (t.APIKeyFile != "" || t.APIKeyEnv != ""):
		errs = append(errs, fmt.Errorf("%s.%s: the key is empty", path, field))
	}
	for field, file := range clientFiles(t.HTTPClientConfig) {
		if f, err := os.Open(file); err != nil {
			errs = append(errs, fmt.Errorf("%s.http_client_config.%s: %w", path, field, err))
		} else {
			f.Close()
		}
	}
	return errors.Join(errs...)
}

// clientFiles lists the files an HTTP client configuration reads, by path.
func clientFiles(h promconfig.HTTPClientConfig) map[string]string {
	out := map[string]string{}
	add := func(path, file string) {
		if file != "" {
			out[path] = file
		}
	}
	for _, c := range credentials(h) {
		add(c.path, c.file)
	}
	add("tls_config.ca_file", h.TLSConfig.CAFile)
	add("tls_config.cert_file", h.TLSConfig.CertFile)
	add("tls_config.key_file", h.TLSConfig.KeyFile)
	if h.HTTPHeaders != nil {
		for name, v := range h.HTTPHeaders.Headers {
			for i, f := range v.Files {
				add(fmt.Sprintf("http_headers.%s.files[%d]", name, i), f)
			}
		}
	}
	return out
}

// setDirectory makes the files a config names relative to the config file, as
// Prometheus does, not to whatever directory the daemon was started from (/
// under systemd).
func (c *Config) setDirectory(dir string) {
	join := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	target := func(t *Target) {
		t.APIKeyFile = join(t.APIKeyFile)
		t.CapacitySeed = join(t.CapacitySeed)
		t.HTTPClientConfig.SetDirectory(dir)
	}
	for i := range c.Targets {
		target(&c.Targets[i])
	}
	for i := range c.Discovery {
		target(&c.Discovery[i].Target)
		c.Discovery[i].setDirectory(dir)
	}
}

// Parse decodes YAML strictly (unknown keys are errors), fills defaults and validates.
func Parse(b []byte) (*Config, error) {
	// Calibration is on unless the file turns it off: without bursts, a
	// window's lone probes at production's loads rarely span a curve.
	// A headroom of 0 is a choice (none kept free), not a missing key.
	c := &Config{Calibration: Calibration{Enabled: true}, Autoscaling: Autoscaling{Headroom: 0.2}}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse: %w", decodeError(err, b))
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) applyDefaults() {
	if len(c.Scenarios) == 0 {
		c.Scenarios = DefaultScenarios()
	}
	if len(c.UseCases) == 0 {
		c.UseCases = DefaultUseCases()
	}
	if c.ProbeBudget == 0 {
		c.ProbeBudget = 0.02
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 64
	}
	if c.Calibration.MaxBurst == 0 {
		// A burst takes its slots at once: no larger than the cap.
		c.Calibration.MaxBurst = max(2, min(64, c.MaxInFlight))
	}
	if c.EngineScrapeInterval == 0 {
		c.EngineScrapeInterval = 5 * time.Second
	}
	if c.EngineScrapeTimeout == 0 {
		c.EngineScrapeTimeout = c.EngineScrapeInterval
	}
	if c.Power.Source == "" {
		c.Power.Source = "auto"
	}
	if c.ProbeHistograms == "" {
		c.ProbeHistograms = "both"
	}
	if c.Autoscaling.ScaleDownStabilization == 0 {
		c.Autoscaling.ScaleDownStabilization = 15 * time.Minute
	}
	if c.MaxTargets == 0 {
		c.MaxTargets = DefaultMaxTargets
	}
	for i := range c.Targets {
		c.Targets[i].SetDefaults()
	}
	for i := range c.Discovery {
		c.Discovery[i].Target.SetDefaults()
	}
	for i := range c.Scenarios {
		s := &c.Scenarios[i]
		if s.Interval == 0 {
			s.Interval = 5 * time.Minute
		}
		if s.Cache == "" {
			s.Cache = "cold"
		}
	}
	for i := range c.UseCases {
		u := &c.UseCases[i]
		if u.Statistic == "" {
			u.Statistic = "mean"
		}
		if u.Window == 0 {
			u.Window = 30 * time.Minute
		}
		if u.CurveWindow == 0 {
			u.CurveWindow = max(6*time.Hour, u.Window)
		}
		if u.OutputTokens == 0 {
			for _, s := range c.Scenarios {
				if s.Name == u.Scenario {
					u.OutputTokens = s.OutputTokens
				}
			}
		}
	}
}

// SetDefaults fills what a target leaves out: a static one as it is read, a
// discovered one once relabeling has given it a URL.
func (t *Target) SetDefaults() {
	if t.API == "" {
		t.API = "chat"
	}
	if t.Engine == "" {
		t.Engine = "auto"
	}
	if reflect.ValueOf(t.HTTPClientConfig).IsZero() {
		t.HTTPClientConfig = promconfig.DefaultHTTPClientConfig
	}
	if t.MetricsURL == "" && t.URL != "" {
		path := "/metrics"
		if t.Engine == "trtllm" {
			path = "/prometheus/metrics" // where trtllm-serve serves it
		}
		// An unparsable URL leaves it empty: check names the url.
		t.MetricsURL, _ = url.JoinPath(t.URL, path)
	}
}

// ScenariosOf lists the scenarios probed on t.
func (c *Config) ScenariosOf(t Target) []Scenario {
	if len(t.Scenarios) == 0 {
		return c.Scenarios
	}
	var out []Scenario
	for _, s := range c.Scenarios {
		if slices.Contains(t.Scenarios, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// Probes reports whether scenario is probed on t.
func (t Target) Probes(scenario string) bool {
	return len(t.Scenarios) == 0 || slices.Contains(t.Scenarios, scenario)
}

// ProbeTimeout is the whole-probe limit: the configured one, or one derived from
// the context length generous enough for a loaded server (the reference reports
// measured 47.6 s TTFT at 256K on an idle H200; under load it is several times that).
func (s Scenario) ProbeTimeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return 30*time.Second + time.Duration(s.InputTokens)*time.Millisecond + time.Duration(s.OutputTokens)*perOutputToken
}

// perOutputToken is what a probe's deadline allows each output token: 10
// tokens a second, slower than any decode threshold a use case sets.
const perOutputToken = 100 * time.Millisecond

// WithOutput is the scenario with probes that generate n tokens, as a
// calibration burst's may (more than its own, for the burst to decode
// together): a configured deadline grows by the allowance for each token
// more, as the derived one does, so that the longer probes are not cut
// for the tokens they were asked for.
func (s Scenario) WithOutput(n int) Scenario {
	if s.Timeout > 0 && n > s.OutputTokens {
		s.Timeout += time.Duration(n-s.OutputTokens) * perOutputToken
	}
	s.OutputTokens = n
	return s
}

// Validate checks every field and reports all problems, each with its path.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	// Written so NaN fails too; below 0.1% a probe's quiet time overflows
	// (1e-300 turned into a time in the past and removed the budget).
	if !(c.ProbeBudget >= MinProbeBudget && c.ProbeBudget <= 1) {
		bad("probe_budget", "must be in [%g, 1], got %g", MinProbeBudget, c.ProbeBudget)
	}
	if c.MaxInFlight < 0 {
		bad("max_in_flight", "must not be negative")
	}
	if c.EngineScrapeInterval < 100*time.Millisecond {
		bad("engine_scrape_interval", "must be at least 100ms, got %s", c.EngineScrapeInterval)
	}
	if c.EngineScrapeTimeout <= 0 || c.EngineScrapeTimeout > c.EngineScrapeInterval {
		bad("engine_scrape_timeout", "must be in (0, engine_scrape_interval (%s)], got %s", c.EngineScrapeInterval, c.EngineScrapeTimeout)
	}
	if b := c.Calibration.MaxBurst; b < 2 || b > 64 {
		bad("calibration.max_burst", "must be in [2, 64], got %d", b)
	} else if c.Calibration.Enabled && c.MaxInFlight > 0 && b > c.MaxInFlight {
		bad("calibration.max_burst", "must not exceed max_in_flight (%d), got %d", c.MaxInFlight, b)
	}
	if c.ProbeHistograms != "both" && c.ProbeHistograms != "native" {
		bad("probe_histograms", "must be both or native, got %q", c.ProbeHistograms)
	}
	// Written so NaN fails too; at 1 no load fits and the replicas needed divide by zero.
	if h := c.Autoscaling.Headroom; !(h >= 0 && h <= 0.9) {
		bad("autoscaling.headroom", "must be in [0, 0.9], got %g", h)
	}
	// The rules are evaluated every minute: a shorter window holds nothing.
	if w := c.Autoscaling.ScaleDownStabilization; w < time.Minute || w%time.Minute != 0 {
		bad("autoscaling.scale_down_stabilization", "must be whole minutes, at least 1m, got %s", w)
	}
	if c.MaxTargets < 0 {
		bad("max_targets", "must not be negative, got %d", c.MaxTargets)
	} else if len(c.Targets) > c.MaxTargets {
		bad("max_targets", "the %d static targets exceed it (%d): raise it, or shard", len(c.Targets), c.MaxTargets)
	}
	switch c.Power.Source {
	case "auto", "nvml", "none":
	case "dcgm":
		if c.Power.DCGMURL == "" {
			bad("power.dcgm_url", "required when power.source is dcgm")
		}
	default:
		bad("power.source", "unknown source %q (auto, nvml, dcgm, none)", c.Power.Source)
	}
	if c.Power.DCGMURL != "" {
		if err := checkURL(c.Power.DCGMURL); err != nil {
			bad("power.dcgm_url", "%v", err)
		}
	}
	// unique checks a list's names: label-safe and not repeated.
	unique := func(list, kind string) func(i int, name string) string {
		seen := map[string]bool{}
		return func(i int, name string) string {
			p := fmt.Sprintf("%s[%d]", list, i)
			if !nameRE.MatchString(name) {
				bad(p+".name", "must match [a-zA-Z0-9_-]+, got %q", name)
			} else if seen[name] {
				bad(p+".name", "duplicate %s %q", kind, name)
			}
			seen[name] = true
			return p
		}
	}
	seen := map[string]bool{}
	for i, t := range c.Targets {
		p := fmt.Sprintf("targets[%d]", i)
		if seen[t.Name] {
			bad(p+".name", "duplicate target %q", t.Name)
		}
		seen[t.Name] = true
		errs = append(errs, t.check(p, false))
	}
	for i, d := range c.Discovery {
		errs = append(errs, d.validate(fmt.Sprintf("discovery[%d]", i)))
	}
	scen := map[string]bool{}
	scenarioName := unique("scenarios", "scenario")
	for i, s := range c.Scenarios {
		p := scenarioName(i, s.Name)
		scen[s.Name] = true
		if s.InputTokens < 16 || s.InputTokens > MaxTokens {
			bad(p+".input_tokens", "must be from 16 to %d, got %d", MaxTokens, s.InputTokens)
		}
		if s.OutputTokens < 2 || s.OutputTokens > MaxTokens {
			bad(p+".output_tokens", "must be from 2 (ITL needs two tokens) to %d, got %d", MaxTokens, s.OutputTokens)
		}
		if s.Interval < time.Second {
			bad(p+".interval", "must be at least 1s, got %s", s.Interval)
		}
		if s.Timeout < 0 {
			bad(p+".timeout", "must not be negative")
		}
		if s.Cache != "cold" && s.Cache != "warm" {
			bad(p+".cache", "must be cold or warm, got %q", s.Cache)
		}
	}
	subset := func(path string, t Target) {
		for j, name := range t.Scenarios {
			if !scen[name] {
				bad(fmt.Sprintf("%s.scenarios[%d]", path, j), "no scenario named %q", name)
			}
		}
	}
	for i, t := range c.Targets {
		subset(fmt.Sprintf("targets[%d]", i), t)
	}
	for i, d := range c.Discovery {
		subset(fmt.Sprintf("discovery[%d].target", i), d.Target)
	}
	useCaseName := unique("use_cases", "use case")
	for i, u := range c.UseCases {
		p := useCaseName(i, u.Name)
		if !scen[u.Scenario] {
			bad(p+".scenario", "no scenario named %q", u.Scenario)
		}
		switch u.Statistic {
		case "mean", "p50", "p90", "p95", "p99":
		default:
			bad(p+".statistic", "must be mean, p50, p90, p95 or p99, got %q", u.Statistic)
		}
		if u.Window < time.Minute {
			bad(p+".window", "must be at least 1m, got %s", u.Window)
		}
		if u.CurveWindow < u.Window {
			bad(p+".curve_window", "must be at least the window (%s), got %s", u.Window, u.CurveWindow)
		}
		if u.OutputTokens < 2 || u.OutputTokens > 1<<20 {
			bad(p+".output_tokens", "must be 2 to 1048576 (ITL needs two tokens), got %d", u.OutputTokens)
		}
		if u.TTFTMax < 0 || u.E2EMax < 0 || u.ITLMax < 0 || u.DecodeMinTPS < 0 {
			bad(p, "thresholds must not be negative")
		}
		// YAML reads .nan and .inf: NaN passes every comparison.
		if !(u.DecodeMinTPS <= maxDecodeTPS) {
			bad(p+".decode_min_tps", "must be a number from 0 to %g, got %g", float64(maxDecodeTPS), u.DecodeMinTPS)
		}
		if u.TTFTMax == 0 && u.E2EMax == 0 && u.ITLMax == 0 && u.DecodeMinTPS == 0 {
			bad(p, "needs at least one of ttft_max, e2e_max, itl_max, decode_min_tps")
		}
	}
	return errors.Join(errs...)
}

// Validate checks a target as discovery produced it; errors name the field.
func (t Target) Validate() error { return t.check(fmt.Sprintf("target %q", short(t.Name)), false) }

// check validates a target's fields, each error under path. A template's
// name and URLs come from relabeling, so it must leave them out.
func (t Target) check(path string, template bool) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s%s: %s", path, field, fmt.Sprintf(format, args...)))
	}
	if template {
		for _, f := range [][2]string{{"name", t.Name}, {"url", t.URL}, {"metrics_url", t.MetricsURL}} {
			if f[1] != "" {
				bad("."+f[0], "comes from relabeling (target, __url__, __metrics_url__), not the template")
			}
		}
	} else {
		if !targetNameRE.MatchString(t.Name) {
			bad(".name", "must match [a-zA-Z0-9_.:/-]+, got %q", short(t.Name))
		}
		if err := CheckBaseURL(t.URL); err != nil {
			bad(".url", "%v", err)
		} else if err := checkURL(t.MetricsURL); err != nil {
			bad(".metrics_url", "%v", err)
		}
	}
	// Each is a label value of every series of the target.
	for _, f := range [][2]string{{"name", t.Name}, {"url", t.URL}, {"metrics_url", t.MetricsURL}, {"pool", t.Pool}, {"model", t.Model}} {
		if len(f[1]) > contract.MaxLabelValue || !utf8.ValidString(f[1]) {
			bad("."+f[0], "a label value of at most %d bytes of UTF-8 is needed, got %d bytes", contract.MaxLabelValue, len(f[1]))
		}
	}
	if t.API != "chat" && t.API != "completions" {
		bad(".api", "must be chat or completions, got %q", t.API)
	}
	if t.APIKeyFile != "" && t.APIKeyEnv != "" {
		bad("", "set api_key_file or api_key_env, not both")
	}
	if (t.APIKeyFile != "" || t.APIKeyEnv != "") && len(credentials(t.HTTPClientConfig)) > 0 {
		bad(".http_client_config", "sets credentials and so does api_key_file or api_key_env; keep one")
	}
	if err := t.HTTPClientConfig.Validate(); err != nil {
		bad(".http_client_config", "%v", err)
	}
	switch t.Engine {
	case "auto", "vllm", "sglang", "tgi", "llamacpp", "trtllm", "nim", "none":
	default:
		bad(".engine", "unknown engine %q", t.Engine)
	}
	return errors.Join(errs...)
}

// short quotes at most the first 64 bytes of a value in an error: a 100 KB
// name is not repeated whole into the log.
func short(v string) string {
	if len(v) <= 64 {
		return v
	}
	return v[:64] + "…"
}

// CheckBaseURL checks an API's base URL: what checkURL checks, and no
// query or fragment, which paths joined after it would end up inside
// (http://host/-/reload? once turned every probe into a POST to the
// daemon's own reload).
func CheckBaseURL(raw string) error {
	if err := checkURL(raw); err != nil {
		return err
	}
	u, _ := url.Parse(raw)
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("a base URL takes no query or fragment: the API's paths are joined after it")
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return errors.New("required")
	case !strings.Contains(raw, "://"):
		return errors.New("missing scheme (want http:// or https://)")
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme == "":
		return errors.New("missing scheme")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	case u.Host == "":
		return errors.New("missing host")
	case u.User != nil:
		return errors.New("credentials in the URL would leak into labels and logs; use api_key_file or api_key_env")
	}
	return nil
}
