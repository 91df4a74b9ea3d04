package estimator

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
)

// Replay reads /api/v1/status, as any version of the daemon wrote it, and
// evaluates its points again through this version's estimator with cfg's
// use cases: what this model says of the servers those probes measured
// (headroom replay). Each target and scenario's points are the most any
// of its use cases' estimates in the file lists (they list the same where
// their curve windows are the same);
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
	// Each target and scenario's points: the longest list of its use
	// cases', whose curve windows may differ.
	points := map[[2]string][]capacity.Point{}
	kv := map[string]float64{}
	var now time.Time
	for i, e := range status.Estimates {
		switch {
		case e.Target == "":
			return nil, fmt.Errorf("read status: estimates[%d]: no target", i)
		case !scenarios[e.Scenario]:
			return nil, fmt.Errorf("read status: estimates[%d]: target %q, scenario %q: not a scenario of the configuration", i, e.Target, e.Scenario)
		}
		if _, ok := kv[e.Target]; !ok {
			replay.Targets = append(replay.Targets, config.Target{Name: e.Target})
			kv[e.Target] = math.NaN()
		}
		if e.KVCache != nil && *e.KVCache > 0 {
			kv[e.Target] = *e.KVCache
		}
		k := [2]string{e.Target, e.Scenario}
		if len(e.Points) > len(points[k]) {
			points[k] = e.Points
		}
		for _, p := range e.Points {
			if p.Time.After(now) {
				now = p.Time
			}
		}
	}
	est := New(&replay, nil)
	for k, ps := range points {
		// The store keeps a series in time order, as the probes came.
		ps = slices.Clone(ps)
		slices.SortStableFunc(ps, func(a, b capacity.Point) int { return a.Time.Compare(b.Time) })
		for _, p := range ps {
			est.store.Add(k[0], k[1], p)
		}
	}
	var out []capacity.Estimate
	for _, t := range replay.Targets {
		load := unread
		load.KVTokens = kv[t.Name] // NaN where the file says none
		_, ests := est.estimates(t.Name, load, now, false)
		out = append(out, ests...)
	}
	return out, nil
}
