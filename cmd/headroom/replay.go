package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"

	"github.com/alecthomas/kingpin/v2"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
)

type replayCmd struct {
	cmd  *kingpin.CmdClause
	file *string
	in   *string
	json *bool
}

func newReplayCmd(app *kingpin.Application) *replayCmd {
	c := &replayCmd{cmd: app.Command("replay", "Evaluate a saved /api/v1/status again with this version's model: each use case's capacity, bounds and fitted laws from the file's probe points.")}
	c.file = c.cmd.Flag("config.file", "Configuration whose scenarios and use cases the points are read with; empty: the defaults.").String()
	c.json = c.cmd.Flag("json", "Print the estimates as /api/v1/status does.").Bool()
	c.in = c.cmd.Arg("status", "the saved /api/v1/status; - for standard input").Required().String()
	return c
}

func (c *replayCmd) run() int {
	if err := c.replay(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "headroom replay:", err)
		return 1
	}
	return 0
}

func (c *replayCmd) replay(w io.Writer) error {
	cfg, err := config.Parse(nil)
	if *c.file != "" {
		cfg, err = config.Load(*c.file)
	}
	if err != nil {
		return err
	}
	in := os.Stdin
	if *c.in != "-" {
		f, err := os.Open(*c.in)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	ests, err := estimator.Replay(cfg, in)
	if err != nil {
		return fmt.Errorf("%s: %w", *c.in, err)
	}
	if *c.json {
		b, err := json.MarshalIndent(map[string]any{"estimates": ests}, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tuse case\tcapacity\tbounds\tpoints\twhy")
	for _, e := range ests {
		bounds := "-"
		if !math.IsNaN(e.Lower) {
			bounds = fmt.Sprintf("%.1f-%.1f", e.Lower, e.Upper)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", e.Target, e.UseCase, e.Shown(), bounds, len(e.Points), e.Why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range ests {
		if m := capacity.Describe(e.Model()); m != "" {
			fmt.Fprintf(w, "%s %s: %s\n", e.Target, e.UseCase, m)
		}
	}
	return nil
}
