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
	// Discovered targets share their template's seed: read each file once.
	type read struct {
		pts map[string][]capacity.Point
		err error
	}
	cache := map[string]read{}
	load := func(path string) (map[string][]capacity.Point, error) {
		if r, ok := cache[path]; ok {
			return r.pts, r.err
		}
		pts, err := loadSeed(cfg, path)
		cache[path] = read{pts, err}
		return pts, err
	}
	for i, d := range cfg.Discovery {
		if d.Target.CapacitySeed != "" {
			if _, err := load(d.Target.CapacitySeed); err != nil {
				errs = append(errs, fmt.Errorf("discovery[%d].target.capacity_seed: %w", i, err))
			}
		}
	}
	for i, t := range cfg.Targets {
		if t.CapacitySeed == "" {
			continue
		}
		pts, err := load(t.CapacitySeed)
		if err != nil {
			errs = append(errs, fmt.Errorf("targets[%d].capacity_seed: %w", i, err))
			continue
		}
		out[t.Name] = pts
	}
	return out, errors.Join(errs...)
}

// loadSeed reads one report's points at each scenario's lengths.
func loadSeed(cfg *config.Config, path string) (map[string][]capacity.Point, error) {
	rep, err := bench.Load(path)
	if err != nil {
		return nil, err
	}
	byScenario := map[string][]capacity.Point{}
	for _, s := range cfg.Scenarios {
		if pts := rep.Points(s.InputTokens, s.OutputTokens); len(pts) > 0 {
			byScenario[s.Name] = pts
		}
	}
	if len(byScenario) == 0 {
		return nil, fmt.Errorf("%s has no closed-loop cell at any scenario's input and output tokens", path)
	}
	return byScenario, nil
}
