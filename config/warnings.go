package config

import (
	"fmt"
	"math"
	"time"

	"github.com/headroom-dev/headroom/capacity"
)

// jitter is the most the schedule shortens an interval (monitor.Schedule).
const jitter = 0.1

// Warnings lists settings that are valid but can never produce what the
// user configured them for: a use case whose curve window cannot hold
// capacity.MinSamples probes of its scenario never gets a capacity estimate
// from its lone probes, only from calibration bursts, if on. Each names the
// use case and the fix.
func (c *Config) Warnings() []string {
	var out []string
	for i, u := range c.UseCases {
		j, s, ok := c.scenario(u.Scenario)
		if !ok {
			continue
		}
		// Probes come at most every (1-jitter)*interval, the budget may only
		// stretch that.
		most := int(math.Floor(u.CurveWindow.Seconds()/((1-jitter)*s.Interval.Seconds()))) + 1
		if most >= capacity.MinSamples {
			continue
		}
		interval := time.Duration(float64(u.CurveWindow) / (capacity.MinSamples - 1) / (1 - jitter)).Truncate(time.Second)
		window := time.Duration(math.Ceil(s.Interval.Minutes()*(1-jitter)*(capacity.MinSamples-1))) * time.Minute
		out = append(out, fmt.Sprintf("use_cases[%d] (%s): never gets a capacity estimate from lone probes: scenarios[%d] (%s) is probed at most every %s, "+
			"so its %s curve_window holds at most %d probes and an estimate needs %d; set scenarios[%d].interval to at most %s or use_cases[%d].curve_window to at least %s",
			i, u.Name, j, s.Name, s.Interval, u.CurveWindow, most, capacity.MinSamples, j, interval, i, window))
	}
	return out
}

func (c *Config) scenario(name string) (int, Scenario, bool) {
	for i, s := range c.Scenarios {
		if s.Name == name {
			return i, s, true
		}
	}
	return 0, Scenario{}, false
}
