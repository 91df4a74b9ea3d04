package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Warnings lists settings that are valid but can never produce what the
// user configured them for. A base URL ending in /v1 sends every request
// to /v1/v1/... The capacity model slopes a use case's laws from requests
// sent together (capacity.Evaluate): calibration bursts, or a bench
// report's cells. A target that has neither gets lower bounds only, never
// an estimate. Each warning names the target and the fix.
func (c *Config) Warnings() []string {
	var out []string
	for i, t := range c.Targets {
		if w := V1Warning(t.URL); w != "" {
			out = append(out, fmt.Sprintf("targets[%d].url: %s", i, w))
		}
	}
	if c.Calibration.Enabled {
		return out
	}
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

// V1Warning says why a base URL ending in /v1 is likely wrong, "" for
// another: the API's paths (/v1/models, /v1/chat/completions) are joined
// after it, so every request would go to /v1/v1/... and 404.
func V1Warning(base string) string {
	if u, err := url.Parse(base); err == nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
		root := *u
		root.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
		root.RawPath = ""
		return fmt.Sprintf("%s ends in /v1, and headroom adds /v1/models and /v1/chat/completions itself: requests would go to /v1/v1/...; give the server's root, %s", base, root.String())
	}
	return ""
}
