package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"

	"github.com/headroom-dev/headroom/config"
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
	return c
}

// demoConfig probes the simulator with the default scenarios and use cases. Its
// probe budget is far above production's 2%: a simulator costs nothing, and a
// newcomer should see every scenario within minutes.
func demoConfig(simURL string) string {
	return fmt.Sprintf(`targets:
  - name: sim
    url: %s
power:
  source: dcgm
  dcgm_url: %s/metrics
probe_budget: 0.5
`, simURL, simURL)
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
	d, err := newDaemon(logger, func() (*config.Config, error) { return config.Parse([]byte(cfgText)) })
	if err != nil {
		logger.Error("demo config", "err", err)
		return 1
	}
	return d.serve(ctx, c.web, func(addrs []net.Addr) {
		for _, a := range addrs {
			base := "http://" + strings.Replace(a.String(), "[::]", "localhost", 1)
			fmt.Printf("headroom demo\n  landing page:   %s/\n  metrics:        %s/metrics\n  capacity JSON:  %s/api/v1/status\n  simulator:      %s (profile %s)\nPress Ctrl-C to stop.\n",
				base, base, base, simURL, c.sim.profile)
		}
	})
}
