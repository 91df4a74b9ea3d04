package estimator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
	"github.com/headroom-dev/headroom/internal/scripted"
)

// A status the daemon wrote replays to the estimates it showed: the same
// points through the same model give the same capacities and bounds, with
// the shipped defaults after an hour of a scripted server (a KV cache and
// a chunked one, idle). A status that names a scenario the configuration
// lacks is refused, naming it.
func TestReplayReadsTheStatusBack(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("an hour of virtual time: not under -short or -race")
	}
	const cfgText = "targets: [{name: sim, url: 'http://sim'}]\n"
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{"kv-cliff", "chunked-prefill"} {
		t.Run(family, func(t *testing.T) {
			var law scripted.Law
			for _, f := range scripted.Families() {
				if f.Name == family {
					law = f.Draw(1)
				}
			}
			w := watchHandler(t, func(ctx context.Context, wg *sync.WaitGroup) http.Handler {
				srv := scripted.NewServer(law, nil)
				wg.Go(func() { srv.Run(ctx) })
				return srv
			}, cfgText, "", 1)
			var shown []capacity.Estimate
			for _, u := range cfg.UseCases {
				shown = append(shown, w.all[u.Name])
			}
			b, err := json.Marshal(map[string]any{"estimates": shown})
			if err != nil {
				t.Fatal(err)
			}
			replayed, err := estimator.Replay(cfg, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if len(replayed) != len(shown) {
				t.Fatalf("%d estimates replayed, want %d", len(replayed), len(shown))
			}
			same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
			for i, want := range shown {
				got := replayed[i]
				if got.UseCase != want.UseCase || !same(got.Capacity, want.Capacity) || !same(got.Lower, want.Lower) || !same(got.Upper, want.Upper) || got.Bound != want.Bound {
					t.Errorf("%s replayed as %.3f [%.3f, %.3f] %s, shown %.3f [%.3f, %.3f] %s", want.UseCase,
						got.Capacity, got.Lower, got.Upper, got.Bound, want.Capacity, want.Lower, want.Upper, want.Bound)
				}
				if len(want.Points) == 0 || len(got.Points) != len(want.Points) {
					t.Errorf("%s: %d points replayed, %d shown", want.UseCase, len(got.Points), len(want.Points))
				}
			}
		})
	}
	for status, want := range map[string]string{
		`{"estimates": [{"target": "sim", "scenario": "ctx-2k", "points": []}]}`: `scenario "ctx-2k": not a scenario of the configuration`,
		`{"estimates": [{"target": "", "scenario": "ctx-8k", "points": []}]}`:    `estimates[0]: no target`,
	} {
		if _, err := estimator.Replay(cfg, strings.NewReader(status)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s replayed with %v, want an error saying %q", status, err, want)
		}
	}
}

// Replay reads outside input: whatever the file holds, it returns
// estimates or an error, never a panic, and an estimate for every
// configured use case of each target the file names.
func FuzzReplay(f *testing.F) {
	f.Add(`{"estimates": [{"target": "a", "scenario": "ctx-8k", "kv_cache_tokens": 100000, "points": [` +
		`{"time": "2026-11-27T09:00:00.000Z", "load": 1, "in_flight": 1, "ttft_s": 0.4, "e2e_s": 1.2, "itl_s": 0.01, "decode_tps": 100, "level": 1},` +
		`{"time": "2026-11-27T09:01:00.000Z", "load": 4, "in_flight": 3.5, "ttft_s": 1.6, "e2e_s": 2.2, "itl_s": null, "decode_tps": null, "burst": 4, "lost": true}]}]}`)
	f.Add(`{"estimates": [{"target": "", "scenario": "ctx-8k"}]}`)
	f.Add(`{"estimates": [{"target": "a", "scenario": "ctx-8k", "points": [{"time": "x"}]}]}`)
	f.Add(`{"estimates": null}`)
	cfg, err := config.Parse(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status string) {
		ests, err := estimator.Replay(cfg, strings.NewReader(status))
		if err != nil {
			return
		}
		targets := map[string]bool{}
		for _, e := range ests {
			targets[e.Target] = true
		}
		if len(ests) != len(targets)*len(cfg.UseCases) {
			t.Errorf("%d estimates for %d targets of %d use cases", len(ests), len(targets), len(cfg.UseCases))
		}
	})
}
