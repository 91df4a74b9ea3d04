package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/internal/daemon"
)

type demoCmd struct {
	cmd    *kingpin.CmdClause
	logCfg *promslog.Config
	web    *webFlags
	sim    simFlags
	pool   int
}

func newDemoCmd(app *kingpin.Application, s settings, logCfg *promslog.Config) *demoCmd {
	c := &demoCmd{logCfg: logCfg}
	c.cmd = app.Command("demo", "Run the daemon against an in-process simulator with background load; no GPU needed.")
	// A demo runs a simulator and the daemon for whoever is at the
	// machine: loopback unless told otherwise (--web.listen-address, or
	// HEADROOM_WEB_LISTEN_ADDRESS, which serve reads too).
	if os.Getenv("HEADROOM_WEB_LISTEN_ADDRESS") == "" {
		s.ListenAddress = demoListen
	}
	c.web = addWebFlags(c.cmd, s)
	addSimFlags(c.cmd, &c.sim, "daily")
	c.cmd.GetFlag("time-scale").Default(fmt.Sprint(demoTimeScale))
	c.cmd.GetFlag("load.period").Default(demoDay.String())
	c.cmd.Flag("pool", "Simulated replicas in the demo's pool, each under its own background load: the pool rules of `headroom rules` size it.").Default("1").IntVar(&c.pool)
	return c
}

// The demo's choices, printed at start: a newcomer should see a capacity for
// every default use case within minutes, which production's settings take an
// hour of a real server to give. The simulator runs demoTimeScale times
// faster than real time (the daemon reads its scale and measures in
// simulated time), its day compressed to demoDay of simulated time; probes
// may take demoBudget of the time (a simulator costs nothing) and each
// scenario is due every demoInterval.
const (
	demoListen    = "127.0.0.1:9835"
	demoTimeScale = 10
	demoDay       = 2 * time.Hour
	demoBudget    = 0.25
	demoInterval  = 10 * time.Second
)

// demoConfig probes the simulators, one pool named demo, with the default
// scenarios and use cases, at the demo's budget and interval.
func demoConfig(simURLs []string) string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for i, u := range simURLs {
		name := "sim"
		if len(simURLs) > 1 {
			name = fmt.Sprintf("sim%d", i)
		}
		fmt.Fprintf(&b, "  - {name: %s, url: '%s', pool: demo}\n", name, u)
	}
	fmt.Fprintf(&b, "power:\n  source: dcgm\n  dcgm_url: %s/metrics\nprobe_budget: %g\nscenarios:\n", simURLs[0], demoBudget)
	for _, s := range config.DefaultScenarios() {
		fmt.Fprintf(&b, "  - {name: %s, input_tokens: %d, output_tokens: %d, interval: %s}\n", s.Name, s.InputTokens, s.OutputTokens, demoInterval)
	}
	return b.String()
}

func (c *demoCmd) run() int {
	logger := promslog.New(c.logCfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.pool < 1 {
		logger.Error("--pool must be at least 1", "pool", c.pool)
		return 1
	}
	var simURLs []string
	for i := range c.pool {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			logger.Error("listen for simulator", "err", err)
			return 1
		}
		_, shutdown, err := startSim(ctx, logger, &c.sim, l, uint64(i+1))
		if err != nil {
			logger.Error("start simulator", "err", err)
			return 1
		}
		defer shutdown()
		simURLs = append(simURLs, "http://"+l.Addr().String())
	}
	cfgText := demoConfig(simURLs)
	d, err := daemon.New(logger, fleet.Shard{}, func() (*config.Config, error) { return config.Parse([]byte(cfgText)) })
	if err != nil {
		logger.Error("demo config", "err", err)
		return 1
	}
	return serveDaemon(ctx, logger, d, c.web, func(addrs []net.Addr) {
		for _, a := range addrs {
			base := "http://" + strings.Replace(a.String(), "[::]", "localhost", 1)
			fmt.Printf("headroom demo\n  status page:    %s/status\n  landing page:   %s/\n  metrics:        %s/metrics\n  capacity JSON:  %s/api/v1/status\n  simulator:      %s (profile %s)\n"+
				"  GPU power:      simulated, from the simulator's DCGM-style metrics (from its engine's utilization; no GPU is read)\n"+
				"  pool demo:      %d simulated replica(s); the pool rules of `headroom rules` size it in Prometheus\n"+
				"  chosen:         simulator at %gx real time, load %s; probe budget %g%%, each scenario due every %s\n"+
				"                 (production: 2%%, every 5m). Capacity appears within about 3 minutes.\nPress Ctrl-C to stop.\n",
				base, base, base, base, strings.Join(simURLs, " "), c.sim.profile, c.pool, c.sim.timeScale, c.sim.describe(), 100*demoBudget, demoInterval)
		}
	})
}
