package estimator

import (
	"errors"
	"fmt"

	"github.com/headroom-dev/headroom/bench"
	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
)

// Seeds are a bench run's points per target and scenario: the capacity
// model's prior until probes carry an estimate (targets[].capacity_seed).
type Seeds map[string]map[string][]capacity.Point

// LoadSeeds reads every target's capacity_seed. A seed that cannot be read,
// or that matches no scenario's input and output tokens, is an error: a
// reload with it keeps the running configuration.
func LoadSeeds(cfg *config.Config) (Seeds, error) {
	out := Seeds{}
	var errs []error
	for i, t := range cfg.Targets {
		if t.CapacitySeed == "" {
			continue
		}
		rep, err := bench.Load(t.CapacitySeed)
		if err != nil {
			errs = append(errs, fmt.Errorf("targets[%d].capacity_seed: %w", i, err))
			continue
		}
		byScenario := map[string][]capacity.Point{}
		for _, s := range cfg.Scenarios {
			if pts := rep.Points(s.InputTokens, s.OutputTokens); len(pts) > 0 {
				byScenario[s.Name] = pts
			}
		}
		if len(byScenario) == 0 {
			errs = append(errs, fmt.Errorf("targets[%d].capacity_seed: %s has no closed-loop cell at any scenario's input and output tokens", i, t.CapacitySeed))
			continue
		}
		out[t.Name] = byScenario
	}
	return out, errors.Join(errs...)
}
