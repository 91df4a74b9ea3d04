package config

import "time"

// DefaultScenarios are the context lengths of the reference reports' use cases
// (reports 000-002): 1K with 128 output tokens for code completion, 1024 otherwise.
func DefaultScenarios() []Scenario {
	mk := func(name string, in, out int, every time.Duration) Scenario {
		return Scenario{Name: name, InputTokens: in, OutputTokens: out, Interval: every, Cache: "cold"}
	}
	return []Scenario{
		mk("ctx-1k", 1024, 128, 5*time.Minute),
		mk("ctx-8k", 8192, 32, 5*time.Minute),
		mk("ctx-32k", 32768, 32, 5*time.Minute),
		mk("ctx-64k", 65536, 32, 10*time.Minute),
		mk("ctx-96k", 98304, 32, 15*time.Minute),
	}
}

// DefaultUseCases are the five use cases and thresholds of reports 000-002,
// with the output their "N concurrent requests" generate (1024 tokens; 128
// for code completion).
func DefaultUseCases() []UseCase {
	mk := func(name, scenario string, ttft, e2e time.Duration, decode float64, output int) UseCase {
		return UseCase{Name: name, Scenario: scenario, Statistic: "mean", Window: 30 * time.Minute,
			TTFTMax: ttft, E2EMax: e2e, DecodeMinTPS: decode, OutputTokens: output}
	}
	return []UseCase{
		mk("code-completion", "ctx-1k", 0, 2*time.Second, 0, 128),
		mk("short-chatbot", "ctx-8k", 10*time.Second, 0, 10, 1024),
		mk("chatbot", "ctx-32k", 8*time.Second, 0, 15, 1024),
		mk("document", "ctx-64k", 12*time.Second, 0, 15, 1024),
		mk("coding-assistant", "ctx-96k", 12*time.Second, 0, 20, 1024),
	}
}
