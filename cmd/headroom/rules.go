package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/headroom-dev/headroom/alerts"
	"github.com/headroom-dev/headroom/config"
)

type rulesCmd struct {
	cmd  *kingpin.CmdClause
	file *string
	job  *string
}

func newRulesCmd(app *kingpin.Application) *rulesCmd {
	c := &rulesCmd{cmd: app.Command("rules", "Print the Prometheus recording and alerting rules for the configured use cases.")}
	c.file = c.cmd.Flag("config.file", "Configuration file whose use cases the rules are for; empty: the defaults.").String()
	c.job = c.cmd.Flag("job", "Prometheus scrape job of headroom itself, for the alerts on headroom being down or absent.").Default("headroom").String()
	return c
}

func (c *rulesCmd) run() int {
	cfg, err := config.Parse(nil)
	if *c.file != "" {
		cfg, err = config.Load(*c.file)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, err := alerts.Rules(cfg, alerts.Options{Job: *c.job})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, _ = os.Stdout.Write(out)
	return 0
}
