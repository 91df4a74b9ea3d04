package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"

	"github.com/headroom-dev/headroom/bench"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/daemon"
	"github.com/headroom-dev/headroom/probe"
)

type benchCmd struct {
	cmd, sweep, compare *kingpin.CmdClause
	logCfg              *promslog.Config

	compareA, compareB, compareDir string
	labelA, labelB                 string

	target                        config.Target
	configFile                    string
	contexts, levels, burst       string
	levelsSet                     bool // --concurrency given: a ladder beside --rate or --burst
	rates, arrival                string
	seed                          uint64
	output, requests, warmup      int
	repeat, maxInFlight           int
	inSpread, outSpread           float64
	cellDuration, burstTTFT       time.Duration
	search                        bool
	searchMax                     int
	dryRun, warm                  bool
	out                           string
	assumedPrefill, assumedDecode float64
	energyPrice                   float64
}

func newBenchCmd(app *kingpin.Application, logCfg *promslog.Config) *benchCmd {
	c := &benchCmd{logCfg: logCfg}
	c.cmd = app.Command("bench", "Run the capacity sweep against a server and write its report (JSON, CSV, Markdown, HTML), or compare two reports.")
	// The sweep's flags are run's own (run is the default: `bench --url X`
	// runs it), so that compare lists and accepts only its own.
	c.sweep = c.cmd.Command("run", "Run the sweep (default).").Default()
	c.sweep.Flag("url", "Base URL of the OpenAI-compatible API.").Default("http://127.0.0.1:8000").StringVar(&c.target.URL)
	c.sweep.Flag("api", "chat or completions.").Default("chat").EnumVar(&c.target.API, "chat", "completions")
	c.sweep.Flag("model", "Model to ask for; empty: the first the server lists.").StringVar(&c.target.Model)
	c.sweep.Flag("api-key-file", "File holding the API key (never printed).").StringVar(&c.target.APIKeyFile)
	c.sweep.Flag("api-key-env", "Environment variable holding the API key (never printed).").StringVar(&c.target.APIKeyEnv)
	c.sweep.Flag("metrics-url", "The server's own /metrics, for queue wait; empty: as the daemon's metrics_url, <url>/metrics (<url>/prometheus/metrics for trtllm).").StringVar(&c.target.MetricsURL)
	c.sweep.Flag("engine", "Engine whose metric names to read: "+strings.Join(append([]string{"auto"}, engine.Engines()...), ", ")+", or none.").
		Default("auto").StringVar(&c.target.Engine)
	c.sweep.Flag("config.file", "Daemon config to take scenarios, use cases and the power source from; empty: the built-in defaults.").StringVar(&c.configFile)
	c.sweep.Flag("contexts", "Comma-separated context lengths in tokens; empty: the config's scenarios.").StringVar(&c.contexts)
	c.sweep.Flag("concurrency", "Comma-separated concurrency levels.").Default(joinInts(bench.DefaultConcurrency)).IsSetByUser(&c.levelsSet).StringVar(&c.levels)
	c.sweep.Flag("output-tokens", "Output tokens per request of the grid and of every use case without an E2E threshold (those keep their scenario's).").Default("1024").IntVar(&c.output)
	c.sweep.Flag("requests-per-cell", "Requests per closed-loop cell; 0: two per slot.").Default("0").IntVar(&c.requests)
	c.sweep.Flag("cell-duration", "Run each closed-loop cell this long instead of a request count (simulated time on a simulator).").DurationVar(&c.cellDuration)
	c.sweep.Flag("warmup", "Requests sent alone and discarded before the first cell of each context and output length.").Default("1").IntVar(&c.warmup)
	c.sweep.Flag("burst", "Comma-separated burst sizes: that many requests at once, nothing after (queue-depth mode).").StringVar(&c.burst)
	c.sweep.Flag("burst.ttft-max", "Mean TTFT limit of the max safe queue depth.").Default("3s").DurationVar(&c.burstTTFT)
	c.sweep.Flag("rate", "Comma-separated request rates (per second): open-loop cells at every context, requests sent at the rate whatever the server's state.").StringVar(&c.rates)
	c.sweep.Flag("rate.max-in-flight", "Most requests an open-loop cell keeps in flight; a send past it waits, and the report counts it.").Default("1024").IntVar(&c.maxInFlight)
	c.sweep.Flag("arrival", "Spacing of the open-loop requests: constant, or poisson (independent users).").Default("poisson").EnumVar(&c.arrival, bench.Constant, bench.Poisson)
	c.sweep.Flag("seed", "Seed of the Poisson arrivals and drawn lengths: the same seed sends the same pattern.").Default("1").Uint64Var(&c.seed)
	c.sweep.Flag("input.spread", "Draw each prompt's length around the cell's with this coefficient of variation (log-normal, seeded by --seed); 0: every prompt at the cell's length.").Default("0").Float64Var(&c.inSpread)
	c.sweep.Flag("output.spread", "Draw each request's output length the same way.").Default("0").Float64Var(&c.outSpread)
	c.sweep.Flag("repeat", "Measure every cell this many times; the report gives each figure and limit a 95% confidence interval.").Default("1").IntVar(&c.repeat)
	c.sweep.Flag("search", "Narrow each use case's limit with extra cells (exponential, then bisection).").BoolVar(&c.search)
	c.sweep.Flag("search.max", "Highest concurrency the search tries.").Default("256").IntVar(&c.searchMax)
	c.sweep.Flag("warm-cache", "Let prompts share a prefix cache (default: a fresh nonce per prompt).").BoolVar(&c.warm)
	c.sweep.Flag("dry-run", "Print the cells, the tokens and the expected duration; send nothing.").BoolVar(&c.dryRun)
	c.sweep.Flag("out", "Directory for report.json/.csv/.md/.html; an existing report.json there is resumed.").Default("bench-report").StringVar(&c.out)
	c.sweep.Flag("assume.prefill-tps", "Dry run and ETA: assumed prompt tokens per second of the server.").Default("10000").Float64Var(&c.assumedPrefill)
	c.sweep.Flag("assume.decode-tps", "Dry run and ETA: assumed output tokens per second of one stream.").Default("60").Float64Var(&c.assumedDecode)
	c.sweep.Flag("energy-price", "Electricity price per kWh for the report's cost per hour; 0: no cost.").Default("0.10").Float64Var(&c.energyPrice)
	c.compare = c.cmd.Command("compare", "Set two reports side by side (before and after a change): compare.html and compare.md.")
	c.compare.Arg("a", "The first report: its report.json or its directory.").Required().StringVar(&c.compareA)
	c.compare.Arg("b", "The second report: its report.json or its directory.").Required().StringVar(&c.compareB)
	c.compare.Flag("out", "Directory for compare.html and compare.md.").Default("bench-compare").StringVar(&c.compareDir)
	c.compare.Flag("label.a", "Name of the first report; empty: its directory's name.").StringVar(&c.labelA)
	c.compare.Flag("label.b", "Name of the second report; empty: its directory's name.").StringVar(&c.labelB)
	return c
}

// runCompare writes the comparison of two reports.
func (c *benchCmd) runCompare() int {
	load := func(path, label string) (*bench.Report, string, error) {
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			path = filepath.Join(path, "report.json")
		}
		rep, err := bench.Load(path)
		if err != nil {
			return nil, "", err
		}
		rep.Derive()
		if label == "" {
			label = filepath.Base(filepath.Dir(path))
		}
		return rep, label, nil
	}
	var cmp bench.Comparison
	var errA, errB error
	cmp.A, cmp.LabelA, errA = load(c.compareA, c.labelA)
	cmp.B, cmp.LabelB, errB = load(c.compareB, c.labelB)
	if err := errors.Join(errA, errB); err != nil {
		fmt.Fprintln(os.Stderr, "headroom bench compare:", err)
		return 1
	}
	if cmp.LabelA == cmp.LabelB {
		cmp.LabelA, cmp.LabelB = "A: "+cmp.LabelA, "B: "+cmp.LabelB
	}
	if err := os.MkdirAll(c.compareDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "headroom bench compare:", err)
		return 1
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"compare.html", cmp.WriteHTML}, {"compare.md", cmp.WriteMarkdown}} {
		path := filepath.Join(c.compareDir, f.name)
		if err := bench.WriteFile(path, f.write); err != nil {
			fmt.Fprintln(os.Stderr, "headroom bench compare:", err)
			return 1
		}
		fmt.Println("Comparison:", path)
	}
	return 0
}

func joinInts(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

// parseList parses a comma-separated flag of positive numbers (what names
// their kind in the error).
func parseList[T int | float64](flag, s, what string, parse func(string) (T, error)) ([]T, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil || !(v > 0) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("--%s: %q is not a positive %s", flag, f, what)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseInts(flag, s string) ([]int, error) { return parseList(flag, s, "integer", strconv.Atoi) }

func parseFloats(flag, s string) ([]float64, error) {
	return parseList(flag, s, "number", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
}

// plan builds the sweep from the flags and the config file.
func (c *benchCmd) plan() (bench.Plan, *config.Config, error) {
	var cfg *config.Config
	var err error
	if c.configFile != "" {
		cfg, err = config.Load(c.configFile)
	} else {
		cfg, err = config.Parse(nil)
	}
	if err != nil {
		return bench.Plan{}, nil, err
	}
	p := bench.Plan{Output: c.output, RequestsPerCell: c.requests, CellDuration: c.cellDuration.Seconds(), Warmup: c.warmup, WarmCache: c.warm,
		BurstTTFTMax: c.burstTTFT.Seconds(), Search: c.search, SearchMax: c.searchMax, Arrival: c.arrival, Seed: c.seed, Repeat: c.repeat, MaxInFlight: c.maxInFlight, InputSpread: c.inSpread, OutputSpread: c.outSpread, UseCases: bench.UseCases(cfg, c.output)}
	var errs []error
	if p.Contexts, err = parseInts("contexts", c.contexts); err != nil {
		errs = append(errs, err)
	} else if len(p.Contexts) == 0 {
		p.Contexts = bench.Contexts(cfg)
	}
	if p.Burst, err = parseInts("burst", c.burst); err != nil {
		errs = append(errs, err)
	}
	if p.Rates, err = parseFloats("rate", c.rates); err != nil {
		errs = append(errs, err)
	}
	// --rate or --burst alone runs only its cells, as vllm bench serve
	// --request-rate does; the closed-loop ladder comes with them only
	// when --concurrency is given too.
	if c.levelsSet || len(p.Burst)+len(p.Rates) == 0 {
		if p.Concurrency, err = parseInts("concurrency", c.levels); err != nil {
			errs = append(errs, err)
		}
	}
	if err := config.CheckBaseURL(c.target.URL); err != nil {
		errs = append(errs, fmt.Errorf("--url: %w", err))
	}
	if c.energyPrice < 0 {
		errs = append(errs, fmt.Errorf("--energy-price: %g is negative", c.energyPrice))
	}
	errs = append(errs, p.Validate())
	return p, cfg, errors.Join(errs...)
}

func (c *benchCmd) run() int {
	logger := promslog.New(c.logCfg)
	plan, cfg, err := c.plan()
	if err != nil {
		fmt.Fprintln(os.Stderr, "headroom bench:", err)
		return 2
	}
	assumed := bench.Assumed{PrefillTPS: c.assumedPrefill, DecodeTPS: c.assumedDecode}
	path := filepath.Join(c.out, "report.json")
	prev, err := bench.Load(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		prev = nil
	case err != nil:
		fmt.Fprintln(os.Stderr, "headroom bench:", err)
		return 1
	}
	if w := config.V1Warning(c.target.URL); w != "" {
		logger.Warn("--url", "problem", w)
	}
	// The daemon's defaults for a target, from the same code: the metrics
	// page is <url>/prometheus/metrics for trtllm, <url>/metrics otherwise.
	c.target.SetDefaults()
	key, keyErr := c.target.APIKey()
	// The key goes to the metrics page on the API's own origin only, as the
	// daemon's metrics_url rule has it.
	metricsKey := ""
	if a, b := parseURL(c.target.URL), parseURL(c.target.MetricsURL); a != nil && b != nil && a.Scheme == b.Scheme && a.Host == b.Host {
		metricsKey = key
	}
	if c.dryRun { // sends nothing: without its key, it reads no time scale either
		scale := 1.0
		if keyErr == nil {
			scale = c.timeScale(logger, metricsKey)
		}
		bench.DryRun(os.Stdout, plan, assumed, scale, func(k bench.Key) bool {
			if prev == nil {
				return false
			}
			_, ok := prev.Cell(k)
			return ok
		})
		return 0
	}
	if keyErr != nil {
		fmt.Fprintln(os.Stderr, "headroom bench:", keyErr)
		return 2
	}
	c.target.Name = "bench"
	rep, err := c.report(prev, plan)
	if err != nil {
		fmt.Fprintln(os.Stderr, "headroom bench:", err)
		return 1
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "headroom bench:", err)
		return 1
	}
	streams := max(maxInt(plan.Concurrency), maxInt(plan.Burst), plan.SearchMax)
	if len(plan.Rates) > 0 {
		streams = max(streams, c.maxInFlight)
	}
	client := bench.NewClient(streams)
	engineName := c.target.Engine
	if engineName == "none" {
		engineName = "auto"
	}
	r := &bench.Runner{
		Prober:   probe.NewProber(probe.Endpoint{BaseURL: c.target.URL, APIKey: key, Client: client}, c.target.API, c.target.Model, engineName),
		Logger:   logger,
		Progress: &bench.Progress{W: os.Stderr, TTY: isTerminal(os.Stderr), Assumed: assumed},
		Save:     func(rep *bench.Report) error { return rep.Save(path) },
	}
	if c.target.Engine != "none" {
		metricsClient := &http.Client{Timeout: 10 * time.Second, CheckRedirect: probe.SameOrigin}
		r.Scrape = func(ctx context.Context) (engine.Load, error) {
			return engine.Scrape(ctx, metricsClient, c.target.MetricsURL, metricsKey, c.target.Engine)
		}
	}
	if src := daemon.OpenPower(logger, cfg.Power, nil); src != nil {
		defer src.Close()
		r.Power = src
		rep.Power = cfg.Power.Source
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runErr := r.Run(ctx, rep)
	stop()
	code := 0
	switch {
	case runErr == nil:
	case errors.Is(runErr, context.Canceled):
		logger.Warn("bench interrupted: finished cells kept; run the same command again to resume", "cells", len(rep.Cells), "report", path)
		code = 130
	case errors.Is(runErr, bench.ErrStalled):
		logger.Error("bench stopped: the server stalled; finished cells kept, run the same command again to resume", "err", runErr, "cells", len(rep.Cells), "report", path)
		code = 1
	default:
		logger.Error("bench", "err", runErr)
		code = 1
	}
	if len(rep.Cells) == 0 {
		return max(code, 1)
	}
	if err := rep.WriteAll(c.out); err != nil {
		logger.Error("write report", "err", err)
		return 1
	}
	logger.Info("bench report written", "dir", c.out, "cells", len(rep.Cells), "complete", rep.Complete)
	if err := rep.WriteSummary(os.Stdout, c.out); err != nil {
		logger.Error("write summary", "err", err)
		return 1
	}
	if failed, why := rep.Failed(); failed {
		logger.Error("bench failed: no request of the sweep succeeded", "err", why)
		return max(code, 1)
	}
	return code
}

// timeScale asks the server's metrics for a simulator's time scale, so that a
// dry run predicts wall time; 1 when it cannot tell.
func (c *benchCmd) timeScale(logger *slog.Logger, key string) float64 {
	if c.target.Engine == "none" {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	l, err := engine.Scrape(ctx, &http.Client{CheckRedirect: probe.SameOrigin}, c.target.MetricsURL, key, c.target.Engine)
	if err != nil {
		logger.Info("server metrics unreadable: durations assume a real server", "err", err)
		return 1
	}
	if l.TimeScale > 0 {
		return l.TimeScale
	}
	return 1
}

// report starts a new report or resumes prev when it measured the same server.
func (c *benchCmd) report(prev *bench.Report, plan bench.Plan) (*bench.Report, error) {
	t := bench.Target{URL: c.target.URL, API: c.target.API, Model: c.target.Model, Engine: c.target.Engine}
	if prev == nil {
		now := time.Now().UTC()
		return &bench.Report{Schema: bench.Schema, Tool: toolVersion(), Started: now, Updated: now, Target: t, TimeScale: 1, Plan: plan, EnergyPrice: c.energyPrice}, nil
	}
	if prev.Target.URL != t.URL || prev.Target.API != t.API || (t.Model != "" && prev.Target.Model != t.Model) {
		return nil, fmt.Errorf("%s/report.json measured %s (%s); give another --out for %s", c.out, prev.Target.URL, prev.Target.Model, t.URL)
	}
	prev.Plan, prev.Complete, prev.Tool, prev.EnergyPrice = plan, false, toolVersion(), c.energyPrice
	return prev, nil
}

// parseURL is u parsed, nil when it does not parse.
func parseURL(u string) *url.URL {
	p, err := url.Parse(u)
	if err != nil {
		return nil
	}
	return p
}

func maxInt(vs []int) int {
	m := 0
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func toolVersion() string {
	if version.Version == "" {
		return "devel"
	}
	return version.Version
}
