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
)

type demoCmd struct {
	cmd    *kingpin.CmdClause
	logCfg *promslog.Config
	web    *webFlags
	sim    simFlags
}

func newDemoCmd(app *kingpin.Application, s settings, logCfg *promslog.Config) *demoCmd {
	c := &demoCmd{logCfg: logCfg}
	c.cmd = app.Command("demo", "Run the daemon against an in-process simulator with background load; no GPU needed.")
	c.web = addWebFlags(c.cmd, s)
	addSimFlags(c.cmd, &c.sim, "daily")
	c.cmd.GetFlag("time-scale").Default(fmt.Sprint(demoTimeScale))
	c.cmd.GetFlag("load.period").Default(demoDay.String())
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
	demoTimeScale = 10
	demoDay       = 2 * time.Hour
	demoBudget    = 0.25
	demoInterval  = 10 * time.Second
)

// demoConfig probes the simulator with the default scenarios and use cases,
// at the demo's budget and interval.
func demoConfig(simURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "targets:\n  - name: sim\n    url: %s\npower:\n  source: dcgm\n  dcgm_url: %s/metrics\nprobe_budget: %g\nscenarios:\n",
		simURL, simURL, demoBudget)
	for _, s := range config.DefaultScenarios() {
		fmt.Fprintf(&b, "  - {name: %s, input_tokens: %d, output_tokens: %d, interval: %s}\n", s.Name, s.InputTokens, s.OutputTokens, demoInterval)
	}
	return b.String()
}

func (c *demoCmd) run() int {
	logger := promslog.New(c.logCfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		logger.Error("listen for simulator", "err", err)
		return 1
	}
	_, shutdown, err := startSim(ctx, logger, &c.sim, l)
	if err != nil {
		logger.Error("start simulator", "err", err)
		return 1
	}
	defer shutdown()
	simURL := "http://" + l.Addr().String()
	cfgText := demoConfig(simURL)
	d, err := newDaemon(logger, fleet.Shard{}, func() (*config.Config, error) { return config.Parse([]byte(cfgText)) })
	if err != nil {
		logger.Error("demo config", "err", err)
		return 1
	}
	return d.serve(ctx, c.web, func(addrs []net.Addr) {
		for _, a := range addrs {
			base := "http://" + strings.Replace(a.String(), "[::]", "localhost", 1)
			fmt.Printf("headroom demo\n  status page:    %s/status\n  landing page:   %s/\n  metrics:        %s/metrics\n  capacity JSON:  %s/api/v1/status\n  simulator:      %s (profile %s)\n"+
				"  chosen:         simulator at %gx real time, %d-%d users over a %s simulated day; probe budget %g%%, each scenario due every %s\n"+
				"                 (production: 2%%, every 5m). Capacity appears within about 3 minutes.\nPress Ctrl-C to stop.\n",
				base, base, base, base, simURL, c.sim.profile, c.sim.timeScale, c.sim.loadMin, c.sim.loadMax, c.sim.period, 100*demoBudget, demoInterval)
		}
	})
}
