package monitor

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/engine"
)

// A server whose counters go back restarted: the same engine with the same
// model and KV cache keeps its curves. One that answers as another engine,
// with another model or another KV cache, was replaced: its curves are forgotten. A counter or
// a cache size the engine does not serve (NaN) says nothing.
func TestChanged(t *testing.T) {
	base := engine.Load{Engine: "vllm", GenerationTokens: 100, PromptTokens: 1000, QueueCount: 10, KVTokens: 32768, Model: "org/model"}
	with := func(f func(*engine.Load)) engine.Load { l := base; f(&l); return l }
	tests := []struct {
		name        string
		before, now engine.Load
		want        string
		another     bool
	}{
		{"first reading", engine.Load{}, base, "", false},
		{"same server, counters grew", base, with(func(l *engine.Load) { l.GenerationTokens, l.QueueCount = 200, 12 }), "", false},
		{"generation tokens went back", base, with(func(l *engine.Load) { l.GenerationTokens = 3 }), "generation tokens counter went back from 100 to 3", false},
		{"prompt tokens went back", base, with(func(l *engine.Load) { l.PromptTokens = 0 }), "prompt tokens counter went back", false},
		{"queue count went back", base, with(func(l *engine.Load) { l.QueueCount = 1 }), "queue time count went back", false},
		{"another engine", base, with(func(l *engine.Load) { l.Engine = "sglang" }), "engine vllm became sglang", true},
		{"another model", base, with(func(l *engine.Load) { l.Model = "other/model" }), `model "org/model" became "other/model"`, true},
		{"another KV cache, counters back", base, with(func(l *engine.Load) { l.KVTokens, l.GenerationTokens = 65536, 0 }), "KV cache of 32768 tokens became 65536", true},
		{"KV cache not served", with(func(l *engine.Load) { l.KVTokens = math.NaN() }), with(func(l *engine.Load) { l.KVTokens, l.GenerationTokens = math.NaN(), 0 }), "generation tokens counter went back", false},
		{"counter not served", with(func(l *engine.Load) { l.GenerationTokens = math.NaN() }), with(func(l *engine.Load) { l.GenerationTokens = math.NaN() }), "", false},
	}
	for _, tc := range tests {
		got, another := changed(tc.before, tc.now)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) || another != tc.another {
			t.Errorf("%s: changed = %q, %v, want %q, %v", tc.name, got, another, tc.want, tc.another)
		}
	}
}
