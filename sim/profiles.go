package sim

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
)

//go:generate go run ./gen

// profiles.json is written by `go generate ./sim`: the fit of each report's
// figures (calibrate.go). It is committed so that the binary starts at once.
//
//go:embed profiles.json
var profilesJSON []byte

// Profile is a calibrated simulated server.
type Profile struct {
	Name   string  `json:"name"`
	Report string  `json:"report"` // the reference report file it was calibrated from
	Model  string  `json:"model"`
	Engine string  `json:"engine"`
	Loss   float64 `json:"fit_loss"`
	Params Params  `json:"params"`
}

// Tiny is a fast profile for tests: milliseconds instead of seconds.
var Tiny = Profile{Name: "tiny", Report: "(none: a fast profile for tests)", Model: "tiny-sim", Engine: "vllm",
	Params: Params{MaxBatch: 64, KVCapacity: 1 << 20, ChunkBudget: 4096, StepBase: 0.002, DecodePerSeq: 0.0002, DecodeExp: 1,
		DecodePerKV: 1e-8, PrefillPerToken: 2e-6, PrefillAttn: 1e-11, Overhead: 0.005, GPUs: 1, IdleWatts: 60, MaxWatts: 400}}

// Profiles lists the calibrated profiles and Tiny.
func Profiles() ([]Profile, error) {
	var ps []Profile
	if err := json.Unmarshal(profilesJSON, &ps); err != nil {
		return nil, fmt.Errorf("embedded profiles: %w", err)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Report < ps[j].Report })
	return append(ps, Tiny), nil
}

// LookupProfile finds a profile by name.
func LookupProfile(name string) (Profile, error) {
	ps, err := Profiles()
	if err != nil {
		return Profile{}, err
	}
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return Profile{}, fmt.Errorf("no profile %q (have %v)", name, names)
}
