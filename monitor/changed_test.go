package monitor

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/engine"
)

// A server whose counters go back restarted, and one that answers as
// another engine was replaced: either way its curves are forgotten. A
// counter the engine does not serve (NaN) says nothing.
func TestChanged(t *testing.T) {
	base := engine.Load{Engine: "vllm", GenerationTokens: 100, PromptTokens: 1000, QueueCount: 10}
	with := func(f func(*engine.Load)) engine.Load { l := base; f(&l); return l }
	tests := []struct {
		name        string
		before, now engine.Load
		want        string
	}{
		{"first reading", engine.Load{}, base, ""},
		{"same server, counters grew", base, with(func(l *engine.Load) { l.GenerationTokens, l.QueueCount = 200, 12 }), ""},
		{"generation tokens went back", base, with(func(l *engine.Load) { l.GenerationTokens = 3 }), "generation tokens counter went back from 100 to 3"},
		{"prompt tokens went back", base, with(func(l *engine.Load) { l.PromptTokens = 0 }), "prompt tokens counter went back"},
		{"queue count went back", base, with(func(l *engine.Load) { l.QueueCount = 1 }), "queue time count went back"},
		{"another engine", base, with(func(l *engine.Load) { l.Engine = "sglang" }), "engine vllm became sglang"},
		{"counter not served", with(func(l *engine.Load) { l.GenerationTokens = math.NaN() }), with(func(l *engine.Load) { l.GenerationTokens = math.NaN() }), ""},
	}
	for _, tc := range tests {
		got := changed(tc.before, tc.now)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: changed = %q, want %q", tc.name, got, tc.want)
		}
	}
}
