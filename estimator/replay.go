package estimator

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
)

// Replay reads /api/v1/status, as any version of the daemon wrote it, and
// evaluates its points again through this version's estimator with cfg's
// use cases: what this model says of the servers those probes measured
// (headroom replay). Each target and scenario's points are those of its
// first estimate in the file (the use cases of a scenario list the same);
// the KV cache is the file's, the load now unknown, and the estimates are
// read at the file's latest point. A scenario that cfg does not define is
// an error: its prompt length is what the points were measured at.
func Replay(cfg *config.Config, r io.Reader) ([]capacity.Estimate, error) {
	var status struct {
		Estimates []struct {
			Target   string           `json:"target"`
			Scenario string           `json:"scenario"`
			KVCache  *float64         `json:"kv_cache_tokens"`
			Points   []capacity.Point `json:"points"`
		} `json:"estimates"`
	}
	if err := json.NewDecoder(r).Decode(&status); err != nil {
		return nil, fmt.Errorf("read status: %w", err)
	}
	scenarios := map[string]bool{}
	for _, s := range cfg.Scenarios {
		scenarios[s.Name] = true
	}
	replay := *cfg
	replay.Targets = nil
	seen := map[[2]string]bool{}
	kv := map[string]float64{}
	var now time.Time
	for i, e := range status.Estimates {
		if e.Target == "" || !scenarios[e.Scenario] {
			return nil, fmt.Errorf("read status: estimates[%d]: target %q, scenario %q: not a scenario of the configuration", i, e.Target, e.Scenario)
		}
		if !slices.ContainsFunc(replay.Targets, func(t config.Target) bool { return t.Name == e.Target }) {
			replay.Targets = append(replay.Targets, config.Target{Name: e.Target})
		}
		if e.KVCache != nil && *e.KVCache > 0 {
			kv[e.Target] = *e.KVCache
		}
		for _, p := range e.Points {
			if p.Time.After(now) {
				now = p.Time
			}
		}
	}
	est := New(&replay, nil)
	for _, e := range status.Estimates {
		k := [2]string{e.Target, e.Scenario}
		if seen[k] {
			continue
		}
		seen[k] = true
		// The store keeps a series in time order, as the probes came.
		points := slices.Clone(e.Points)
		slices.SortStableFunc(points, func(a, b capacity.Point) int { return a.Time.Compare(b.Time) })
		for _, p := range points {
			est.store.Add(e.Target, e.Scenario, p)
		}
	}
	var out []capacity.Estimate
	for _, t := range replay.Targets {
		load := unread
		if v, ok := kv[t.Name]; ok {
			load.KVTokens = v
		}
		_, ests := est.estimates(t.Name, load, now, false)
		out = append(out, ests...)
	}
	return out, nil
}
