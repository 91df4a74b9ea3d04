package bench

import (
	"fmt"
	"strings"
	"time"
)

// Term is a glossary entry.
type Term struct{ Name, Meaning string }

// Glossary defines the report's terms as headroom measures them.
var Glossary = []Term{
	{"Concurrent requests", "Requests in flight at once. In a closed loop each finished request is replaced at once, so the server always holds that many. One request slot serves several users who pause between requests."},
	{"Burst", "That many requests sent at the same instant and nothing after: a sudden queue."},
	{"TTFT", "Time to first token: from sending the request to the first streamed token. Queue wait plus prefill."},
	{"Queue wait", "Time a request waited in the server before its prefill began, from the server's own metrics."},
	{"Prefill speed", "Prompt tokens over TTFT: how fast the context was read, as the user sees it."},
	{"Generation speed", "Output tokens after the first over the time they took: how fast the response streams to one user (decode speed)."},
	{"ITL", "Inter-token latency: the mean time between consecutive output tokens of a request."},
	{"E2E", "End-to-end latency: from sending the request to its last token."},
	{"System throughput", "Output tokens per second of all the cell's requests together, over the cell's duration. Prompt tokens are not counted."},
	{"Scaling efficiency", "System throughput over the single-request throughput times the concurrency. 100% is linear scaling."},
	{"Capacity limit", "The concurrency at which a use case's first threshold is crossed, interpolated between the highest level that passed and the first that did not. N+ means no tested level crossed one."},
	{"Max safe queue depth", "The largest burst whose mean TTFT stays within the burst TTFT limit."},
	{"Indicative (†)", fmt.Sprintf("A percentile read from fewer than %d requests: it says little about the tail.", MinSamples)},
}

// Param is one test parameter of the methodology.
type Param struct{ Name, Value string }

// Methodology lists how the sweep was run, with the exact parameters.
func (r *Report) Methodology() []Param {
	p := r.Plan
	ints := func(vs []int, name func(int) string) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = name(v)
		}
		return strings.Join(s, ", ")
	}
	itoa := func(v int) string { return fmt.Sprint(v) }
	out := []Param{
		{"Server", fmt.Sprintf("%s, %s API, model %s, engine %s", r.Target.URL, r.Target.API, r.Target.Model, r.Target.Engine)},
		{"Context lengths (prompt tokens)", ints(p.Contexts, itoa)},
		{"Concurrency levels", ints(p.Concurrency, itoa)},
		{"Output tokens per request", fmt.Sprintf("%d in the grid; each use case at its own (below)", p.Output)},
		{"Load", "closed loop: each slot sends its next request as soon as its last one finished"},
		{"Requests per cell", p.requestsText()},
		{"Warm-up", fmt.Sprintf("%d request(s) alone before the first cell of each context and output length, discarded", p.Warmup)},
		{"Prompts", "sized to the context with the server's own tokenizer where it has one; streamed responses with usage"},
	}
	if p.InputSpread > 0 || p.OutputSpread > 0 {
		out = append(out, Param{"Lengths", fmt.Sprintf("drawn per request, log-normal around the cell's lengths: prompt spread %g, output spread %g (coefficients of variation), clamped to a quarter to twice the cell's, seed %d; prompts sized with the fit made at the cell's length",
			p.InputSpread, p.OutputSpread, p.Seed)})
	}
	if p.WarmCache {
		out = append(out, Param{"Prompt caching", "allowed: prompts of a length share their text"})
	} else {
		out = append(out, Param{"Prompt caching", "defeated: every prompt starts with a fresh nonce, so each is prefilled in full (worst-case TTFT)"})
	}
	if len(p.Burst) > 0 {
		out = append(out, Param{"Bursts", fmt.Sprintf("%s requests at once at each context; safe depth at mean TTFT <= %gs", ints(p.Burst, itoa), p.BurstTTFTMax)})
	}
	if len(p.Rates) > 0 {
		rates := make([]string, len(p.Rates))
		for i, v := range p.Rates {
			rates[i] = fmt.Sprintf("%g/s", v)
		}
		out = append(out, Param{"Open loop", fmt.Sprintf("%s at each context, %s arrivals (seed %d), each request sent on schedule whatever the server's state; %d s of sends (at least %d requests) per rate unless given",
			strings.Join(rates, ", "), p.Arrival, p.Seed, DefaultRateSeconds, MinSamples)})
	}
	if p.Search {
		out = append(out, Param{"Search", fmt.Sprintf("each use case's limit narrowed with extra cells (doubling, then bisection) up to %d", p.SearchMax)})
	}
	for _, u := range p.UseCases {
		out = append(out, Param{"Use case " + u.Name, fmt.Sprintf("%d prompt and %d output tokens; %s", u.Context, u.Output, u.thresholdText())})
	}
	if r.TimeScale != 1 {
		out = append(out, Param{"Time", fmt.Sprintf("a simulated server at %gx real time; every time and rate is simulated time", r.TimeScale)})
	}
	if r.Power != "" {
		out = append(out, Param{"GPU power", "read from " + r.Power + " before and after each cell; power is the energy over the cell's duration"})
	}
	out = append(out, Param{"Run", fmt.Sprintf("%s to %s, headroom %s", r.Started.Format(time.RFC3339), r.Updated.Format(time.RFC3339), r.Tool)})
	return out
}

func (p Plan) requestsText() string {
	switch {
	case p.CellDuration > 0:
		return fmt.Sprintf("as many as fit %gs per cell", p.CellDuration)
	case p.RequestsPerCell > 0:
		return fmt.Sprintf("%d per cell", p.RequestsPerCell)
	}
	return fmt.Sprintf("%d per slot (%d x the concurrency)", DefaultRounds, DefaultRounds)
}
