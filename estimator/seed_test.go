package estimator

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/bench"
	"github.com/headroom-dev/headroom/config"
)

// seedReport is bench's recorded sweep, with edit applied to its JSON.
func seedReport(t testing.TB, edit func(r map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile("../bench/testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	edit(r)
	if b, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	return b
}

func seedCell(r map[string]any, i int) map[string]any { return r["cells"].([]any)[i].(map[string]any) }

// seedConfig is a target seeded from path, at the recorded sweep's lengths.
func seedConfig(t testing.TB, path string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte("targets: [{name: a, url: 'http://h', capacity_seed: " + path + "}]\n" +
		"scenarios: [{name: s, input_tokens: 1024, output_tokens: 256}]\nuse_cases: [{name: u, scenario: s, ttft_max: 1s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Seeds at a concurrency of -5, 0 or 2^62, or a context of -1, are refused
// with the field's path: the last once seeded a capacity of 9.22e18.
func TestLoadSeedsRefusesAbsurdCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"concurrency -5", func(r map[string]any) { seedCell(r, 1)["concurrency"] = -5 }, "cells[1].concurrency: -5 is out of range"},
		{"concurrency 0", func(r map[string]any) { seedCell(r, 1)["concurrency"] = 0 }, "cells[1].concurrency: 0 is out of range"},
		{"concurrency 2^62", func(r map[string]any) { seedCell(r, 1)["concurrency"] = 1 << 62 }, "cells[1].concurrency: 4.611686018427388e+18 is out of range"},
		{"context -1", func(r map[string]any) { seedCell(r, 0)["context"] = -1 }, "cells[0].context: -1 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "report.json")
			if err := os.WriteFile(path, seedReport(t, tc.edit), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadSeeds(seedConfig(t, path))
			if err == nil || !strings.Contains(err.Error(), "targets[0].capacity_seed: bench report "+path+": "+tc.want) {
				t.Errorf("LoadSeeds: %v\nwant an error naming %q", err, tc.want)
			}
		})
	}
}

// FuzzLoadSeeds reads any report as a seed: what LoadSeeds takes are points
// at a concurrency a client can keep in flight, with finite latencies.
func FuzzLoadSeeds(f *testing.F) {
	f.Add(seedReport(f, func(map[string]any) {}))
	f.Add(seedReport(f, func(r map[string]any) { seedCell(r, 1)["concurrency"] = 1 << 62 }))
	f.Add(seedReport(f, func(r map[string]any) { seedCell(r, 0)["context"] = -1 }))
	f.Add(seedReport(f, func(r map[string]any) { seedCell(r, 0)["duration_s"] = 5e-324 }))
	f.Add([]byte(`{"schema":1,"time_scale":1,"plan":{"contexts":[1024],"concurrency":[65536],"output_tokens":256},` +
		`"cells":[{"mode":"closed","context":1024,"output":256,"concurrency":65536,"duration_s":1e7,"requests":[{"ttft_s":1e7,"e2e_s":1e7,"itl_s":1e7,"decode_tps":1e9}]}]}`))
	dir := f.TempDir()
	path := filepath.Join(dir, "report.json")
	cfg := seedConfig(f, path)
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		seeds, err := LoadSeeds(cfg)
		if err != nil {
			return
		}
		for _, pts := range seeds["a"] {
			for _, p := range pts {
				if !(p.Load >= 1 && p.Load <= bench.MaxConcurrency) {
					t.Fatalf("a seed point at load %g", p.Load)
				}
				for _, v := range []float64{p.TTFT, p.E2E, p.ITL, p.Decode} {
					if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
						t.Fatalf("a seed point of %+v", p)
					}
				}
			}
		}
	})
}
