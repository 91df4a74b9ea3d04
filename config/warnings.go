package config

import "fmt"

// Warnings lists settings that are valid but can never produce what the
// user configured them for. The capacity model slopes a use case's laws
// from requests sent together (capacity.Evaluate): calibration bursts, or a
// bench report's cells. A target that has neither gets lower bounds only,
// never an estimate. Each warning names the target and the fix.
func (c *Config) Warnings() []string {
	if c.Calibration.Enabled {
		return nil
	}
	var out []string
	for i, t := range c.Targets {
		if t.CapacitySeed == "" {
			out = append(out, fmt.Sprintf("targets[%d] (%s): never gets a capacity estimate, only lower bounds: calibration is disabled and it has no capacity_seed; "+
				"set calibration.enabled: true or targets[%d].capacity_seed to a `headroom bench` report.json of the server", i, t.Name, i))
		}
	}
	if len(c.Discovery) > 0 {
		out = append(out, "discovery: discovered targets never get a capacity estimate, only lower bounds: calibration is disabled; set calibration.enabled: true")
	}
	return out
}
