package main

import (
	"fmt"
	"os"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
)

func checkConfig(path string) int {
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
	return 0
}
