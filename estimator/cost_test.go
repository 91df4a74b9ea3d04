package estimator

import (
	"math"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/capacity"
	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/probe"
)

// A short prompt's lone probes that waited behind production's long ones
// charge them by their cost, which the use cases' lone prefills measure,
// not by their tokens. The law: 70 ms before the engine, then first come
// first served, an 8K prompt's prefill 0.125 s (15 µs a token) and a 64K
// one's 4.0 s (61 µs a token: attention). Counted by its tokens, a 64K
// prompt ahead is 8 of the chat's prompts and costs 0.5 s each; its bursts
// say 0.125. The chat's prefill alone and the lag, which say what its
// prompt costs, are read from the same fit: the levels are read again with
// the cost they imply until it settles.
func TestLevelsCountProductionsPromptsByTheirCost(t *testing.T) {
	cfg, err := config.Parse([]byte("targets: [{name: a, url: 'http://h'}]\n" +
		"scenarios: [{name: chat, input_tokens: 8192, output_tokens: 64}, {name: doc, input_tokens: 65536, output_tokens: 64}]\n" +
		"use_cases: [{name: chat, scenario: chat, ttft_max: 2s}, {name: doc, scenario: doc, ttft_max: 30s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	const lag, chat, doc = 0.07, 0.125, 4.0
	now := time.Now()
	e := New(cfg, nil)
	at := now.Add(-55 * time.Minute)
	record := func(scenario string, burst int, load, level, queued, ttft float64) {
		secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
		e.Record(monitor.Sample{Target: "a", Scenario: scenario, Time: at, Burst: burst, Load: load, InFlight: load, Sent: load, Level: level, Queued: queued,
			Result: probe.Result{Outcome: probe.Success, Start: at, TTFT: secs(ttft), E2E: secs(ttft + 0.64), Decode: 640 * time.Millisecond, CompletionTokens: 64}})
	}
	for i := range 6 {
		jitter := 1 + 0.01*float64(i%3-1)
		at = at.Add(time.Minute)
		record("chat", 0, 1, 1, 0, (lag+chat)*jitter)
		at = at.Add(time.Minute)
		record("doc", 0, 1, 1, 0, (lag+doc)*jitter)
		// Behind what is left of a production document, as most of a
		// busy server's lone probes are: its tokens read as 8f of the
		// chat's prompts, its cost 32f.
		for j := range 3 {
			f := 0.1 + 0.05*float64(3*i+j)
			at = at.Add(time.Minute)
			record("chat", 0, 1, 1+8*f, 65536, (lag+chat+f*doc)*jitter)
		}
	}
	for _, n := range []int{4, 8} {
		at = at.Add(time.Minute)
		for k := 1; k <= n; k++ {
			record("chat", n, float64(n), 0, 65536, lag+chat*float64(k))
		}
	}
	got := e.Estimates([]collector.TargetStatus{{Name: "a", Up: true, Load: engine.Load{Running: 0}}}, now)
	param := func(est capacity.Estimate, symbol string) float64 {
		for _, p := range est.Model() {
			if p.Law == "ttft" && p.Symbol == symbol {
				return p.Value
			}
		}
		return math.NaN()
	}
	alone, ahead := param(got[0], "τ0"), param(got[0], "τq")
	t.Logf("the chat's prefill alone %.3f s, a prompt ahead %.3f s", alone, ahead)
	if !(math.Abs(ahead-chat) < 0.1*chat) || !(math.Abs(alone-lag-chat) < 0.1*chat) {
		t.Errorf("the chat's law %.3f s + %.3f s a prompt ahead, want %.3f + %.3f: its lone probes' and its bursts' (model %+v)", alone, ahead, lag+chat, chat, got[0].Model())
	}
}
