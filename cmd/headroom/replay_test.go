package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/internal/golden"
)

// headroom replay reads a saved /api/v1/status (here a llama.cpp run's,
// docs/real-engine.md's run 72) with its configuration and prints what
// this version's model says of it: its golden file changes with the
// model, and the diff is the model's change on a real engine's probes.
func TestReplay(t *testing.T) {
	tests := []struct {
		name, config, status string
		json                 bool
		golden, err          string
	}{
		{"a llama.cpp run", "testdata/replay-llamacpp.yml", "testdata/replay-llamacpp-status.json", false, "testdata/replay-llamacpp.txt", ""},
		{"as JSON", "testdata/replay-llamacpp.yml", "testdata/replay-llamacpp-status.json", true, "", ""},
		{"the defaults lack its scenario", "", "testdata/replay-llamacpp-status.json", false, "", `scenario "chat-2k": not a scenario of the configuration`},
		{"no such file", "", "testdata/none.json", false, "", "testdata/none.json"},
		{"not a status", "", "testdata/replay-llamacpp.yml", false, "", "read status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &replayCmd{file: &tc.config, in: &tc.status, json: &tc.json}
			var out bytes.Buffer
			err := c.replay(&out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.golden != "" {
				golden.Check(t, tc.golden, out.Bytes())
				return
			}
			var back struct {
				Estimates []struct {
					UseCase string         `json:"use_case"`
					Model   map[string]any `json:"model"`
					Points  []any          `json:"points"`
				} `json:"estimates"`
			}
			if err := json.Unmarshal(out.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if len(back.Estimates) != 2 || back.Estimates[0].Model["ttft"] == nil || len(back.Estimates[0].Points) == 0 {
				t.Errorf("replayed JSON %s", out.Bytes())
			}
		})
	}
}
