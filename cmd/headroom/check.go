package main

import (
	"context"
	"fmt"
	"os"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
	"github.com/headroom-dev/headroom/internal/preflight"
	"github.com/headroom-dev/headroom/monitor"
)

// checkConfig validates a configuration file and, with tryTargets, tries
// each of its targets once (internal/preflight): exit 1 when the file is
// invalid or a target does not answer.
func checkConfig(path string, tryTargets bool) int {
	c, err := config.Load(path)
	if err == nil {
		_, err = estimator.LoadSeeds(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s: ok: %d targets, %d discovery entries, %d scenarios, %d use cases\n", path, len(c.Targets), len(c.Discovery), len(c.Scenarios), len(c.UseCases))
	for _, w := range c.Warnings() {
		fmt.Printf("warning: %s\n", w)
	}
	if !tryTargets {
		return 0
	}
	code := 0
	for _, t := range c.Targets {
		r := preflight.Check(context.Background(), t, c.ScenariosOf(t), monitor.Clients)
		if err := r.Write(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if r.Err() != nil {
			code = 1
		}
	}
	if len(c.Discovery) > 0 {
		fmt.Println("discovery: the targets it finds are not tried; run the daemon and read /status")
	}
	return code
}
