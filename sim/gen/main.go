// Command gen fits every reference report's figures and writes profiles.json.
// Run it with `go generate ./sim`; it takes a few minutes.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/headroom-dev/headroom/sim"
)

// Evals is the fit's evaluation budget per report.
const Evals = 1500

func main() {
	rs, err := sim.Reports()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ps := make([]sim.Profile, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			p, loss := sim.Calibrate(r, Evals)
			ps[i] = sim.Profile{Name: r.Profile, Report: r.File, Model: r.Model, Engine: r.Engine, Loss: loss, Params: p}
			fmt.Fprintf(os.Stderr, "%s: loss %.3f\n", r.Profile, loss)
		})
	}
	wg.Wait()
	b, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile("profiles.json", append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
