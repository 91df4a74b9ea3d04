package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	"github.com/headroom-dev/headroom/sim"
)

// DefaultProfile is the simulator's and the demo's default: report 002, vLLM on an H200.
const DefaultProfile = "qwen3-coder-30b-a3b-fp8-h200-vllm"

type simFlags struct {
	profile, style, load, levels string
	timeScale, growth            float64
	loadMin, loadMax             int
	period, hold                 time.Duration
}

func addSimFlags(cmd *kingpin.CmdClause, f *simFlags, defaultLoad string) {
	cmd.Flag("profile", "Simulator profile (see `headroom sim profiles`).").Default(DefaultProfile).StringVar(&f.profile)
	cmd.Flag("time-scale", "Virtual seconds per wall second; > 1 runs faster than real time.").Default("1").Float64Var(&f.timeScale)
	cmd.Flag("metrics-style", "Engine metric names on /metrics: vllm or sglang.").Default("vllm").EnumVar(&f.style, "vllm", "sglang")
	cmd.Flag("load", "Background load: none, daily (a compressed day), steps (fixed levels) or rising (load.min users for load.hold, then load.growth more each minute).").Default(defaultLoad).EnumVar(&f.load, "none", "daily", "steps", "rising")
	cmd.Flag("load.min", "Fewest background users (daily); the users to start from (rising).").Default("1").IntVar(&f.loadMin)
	cmd.Flag("load.max", "Most background users (daily).").Default("12").IntVar(&f.loadMax)
	cmd.Flag("load.period", "Virtual length of one compressed day (daily).").Default("20m").DurationVar(&f.period)
	cmd.Flag("load.levels", "Comma-separated user counts (steps).").Default("1,2,4,8").StringVar(&f.levels)
	cmd.Flag("load.hold", "Virtual time each level holds (steps), or the start before it rises (rising).").Default("5m").DurationVar(&f.hold)
	cmd.Flag("load.growth", "Users added each virtual minute, compounded (rising): 0.01 is 1% a minute.").Default("0.01").Float64Var(&f.growth)
}

func (f *simFlags) pattern() (sim.Pattern, error) {
	switch f.load {
	case "daily":
		if f.loadMin < 0 || f.loadMax < f.loadMin || f.period <= 0 {
			return nil, errors.New("--load daily needs 0 <= load.min <= load.max and a positive load.period")
		}
		return sim.Daily{Min: f.loadMin, Max: f.loadMax, Period: f.period.Seconds()}, nil
	case "steps":
		var levels []int
		for _, s := range strings.Split(f.levels, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--load.levels: %q is not a user count", s)
			}
			levels = append(levels, n)
		}
		return sim.Steps{Levels: levels, Hold: f.hold.Seconds()}, nil
	case "rising":
		if f.loadMin < 1 || !(f.growth >= 0) || f.hold < 0 {
			return nil, errors.New("--load rising needs load.min >= 1, load.growth >= 0 and load.hold >= 0")
		}
		return sim.Rising{Start: f.loadMin, Hold: f.hold.Seconds(), Growth: f.growth}, nil
	}
	return nil, nil
}

// describe says what background load the flags ask for, in virtual time.
func (f *simFlags) describe() string {
	switch f.load {
	case "daily":
		return fmt.Sprintf("daily, %d-%d users over a %s simulated day", f.loadMin, f.loadMax, f.period)
	case "steps":
		return fmt.Sprintf("steps of %s users, %s each", f.levels, f.hold)
	case "rising":
		return fmt.Sprintf("rising, %d users for %s, then %g%% more each minute", f.loadMin, f.hold, 100*f.growth)
	}
	return f.load
}

// startSim starts a simulated server on l; it stops when ctx ends. seed
// sets when its background users arrive and what they send: replicas of a
// demo's pool differ by it.
func startSim(ctx context.Context, logger *slog.Logger, f *simFlags, l net.Listener, seed uint64) (*sim.Server, func(), error) {
	if f.timeScale <= 0 {
		return nil, nil, errors.New("--time-scale must be positive")
	}
	p, err := sim.LookupProfile(f.profile)
	if err != nil {
		return nil, nil, err
	}
	pat, err := f.pattern()
	if err != nil {
		return nil, nil, err
	}
	srv := sim.NewServer(p, f.timeScale, f.style)
	ctx, cancel := context.WithCancel(ctx)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{}, 3)
	go func() { srv.Run(ctx); done <- struct{}{} }()
	go func() {
		if pat != nil {
			srv.RunLoad(ctx, pat, sim.DefaultMix, seed)
		}
		done <- struct{}{}
	}()
	go func() {
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("sim serve", "err", err)
		}
		done <- struct{}{}
	}()
	logger.Info("simulator listening", "address", l.Addr().String(), "profile", p.Name, "report", p.Report,
		"time_scale", f.timeScale, "load", f.load)
	stop := func() {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx)
		cancel()
		for range 3 {
			<-done
		}
	}
	return srv, stop, nil
}

type simCmd struct {
	serve, profiles, validate *kingpin.CmdClause
	logCfg                    *promslog.Config
	flags                     simFlags
	listen                    string
	validateProfile           string
	all                       bool
	fleet                     int
}

func newSimCmd(app *kingpin.Application, logCfg *promslog.Config) *simCmd {
	c := &simCmd{logCfg: logCfg}
	root := app.Command("sim", "The simulated OpenAI-compatible inference server.")
	c.serve = root.Command("serve", "Serve the simulator (default).").Default()
	c.serve.Flag("listen", "Address to listen on.").Default("127.0.0.1:8000").StringVar(&c.listen)
	addSimFlags(c.serve, &c.flags, "none")
	c.serve.Flag("fleet", "Serve this many simulated servers, /s0/ to /s<N-1>/, each an engine of its own, listed for http_sd at /targets (no background load).").IntVar(&c.fleet)
	c.profiles = root.Command("profiles", "List profiles: name, then the reference report it was calibrated from.")
	c.validate = root.Command("validate", "Replay reference reports' protocols in virtual time and compare every figure.")
	c.validate.Flag("profile", "Profile to validate.").StringVar(&c.validateProfile)
	c.validate.Flag("all", "Validate every calibrated profile.").BoolVar(&c.all)
	return c
}

func (c *simCmd) dispatch(cmd string) (int, bool) {
	switch cmd {
	case c.serve.FullCommand():
		return c.runServe(), true
	case c.profiles.FullCommand():
		ps, err := sim.Profiles()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1, true
		}
		for _, p := range ps {
			fmt.Printf("%s\t%s\n", p.Name, p.Report)
		}
		return 0, true
	case c.validate.FullCommand():
		return c.runValidate(), true
	}
	return 0, false
}

func (c *simCmd) runServe() int {
	logger := promslog.New(c.logCfg)
	l, err := net.Listen("tcp", c.listen)
	if err != nil {
		logger.Error("listen", "address", c.listen, "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.fleet > 0 {
		return c.serveFleet(ctx, logger, l)
	}
	_, shutdown, err := startSim(ctx, logger, &c.flags, l, 1)
	if err != nil {
		logger.Error("start simulator", "err", err)
		return 1
	}
	<-ctx.Done()
	shutdown()
	return 0
}

// serveFleet serves --fleet simulated servers on l until ctx ends.
func (c *simCmd) serveFleet(ctx context.Context, logger *slog.Logger, l net.Listener) int {
	p, err := sim.LookupProfile(c.flags.profile)
	if err != nil || c.flags.timeScale <= 0 {
		logger.Error("start simulator fleet", "err", err, "time_scale", c.flags.timeScale)
		return 1
	}
	ctx, cancel := context.WithCancel(ctx)
	f := sim.NewFleet(ctx, p, c.flags.timeScale, c.flags.style, c.fleet)
	hs := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx)
	}()
	logger.Info("simulator fleet listening", "address", l.Addr().String(), "servers", c.fleet, "profile", p.Name, "targets", "http://"+l.Addr().String()+"/targets")
	err = hs.Serve(l)
	cancel()
	f.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("sim serve", "err", err)
		return 1
	}
	return 0
}

func (c *simCmd) runValidate() int {
	if c.all == (c.validateProfile != "") {
		fmt.Fprintln(os.Stderr, "sim validate: give --profile NAME or --all")
		return 2
	}
	reports, err := sim.Reports()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ok, found := true, false
	for _, r := range reports {
		if !c.all && r.Profile != c.validateProfile {
			continue
		}
		found = true
		p, err := sim.LookupProfile(r.Profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("== %s (calibrated from %s, %s on %s)\n", p.Name, r.File, r.Model, r.GPU)
		if !sim.PrintChecks(os.Stdout, r, sim.Validate(p.Params, r)) {
			ok = false
		}
		fmt.Println()
	}
	if !found {
		fmt.Fprintf(os.Stderr, "sim validate: no report is calibrated into profile %q\n", c.validateProfile)
		return 2
	}
	if !ok {
		fmt.Println("FAIL: figures outside tolerance")
		return 1
	}
	fmt.Println("ok: every judged figure within tolerance")
	return 0
}
