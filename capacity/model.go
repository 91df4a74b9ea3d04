package capacity

// The engine model. A request's latencies are affine in what it shares the
// server with, each term a named physical cost (docs/capacity-model.md):
//
//	TTFT = τ0 + τq·(q−1) + τw·w + τd·d   q: prompts prefilled ahead of it, itself
//	       + τk·k                         included; w: prompts beside it waiting
//	                                      for prefill too; d: sequences decoding
//	ITL  = 1 / (s/(D+δp) + (1−s)/D)      D, a decode step: δ0 + δb·(b−1) + δa·(a−b)
//	                                      + δ2·(b−1)² + δk·k; b: the batch it decoded
//	                                      in; a: requests in flight when it arrived,
//	                                      which fix the speed on servers that plan a
//	                                      request on arrival; s: the share of its
//	                                      decode's time while prompts were waiting
//	                                      for their first token, whose prefill makes
//	                                      each step δp longer; k: the KV tokens
//	                                      production's sequences hold beyond as many
//	                                      of the use case's shape (thousands)
//
// Every count is of requests of the use case's own shape, which is what its
// bursts measure and what the capacity asks; production's requests are of
// any shape, and a decode step reads every token its batch holds, so k
// charges what production holds beyond its count's worth (the engine's KV
// usage says): zero where production is of the use case's shape or the
// engine does not say, and the capacity's twin, with no production, never
// reads it.
//
// The laws are fitted where their parts live: observations.go turns the
// window's points into the laws' rows, part.go fits one law to them and
// reads its parameters, itl.go holds the ITL law's nonlinear fit and its
// terms, prior.go what a target's other use cases lend a use case's laws,
// and fitted.go places the fitted laws against the thresholds.
//
// The twin (twin.go) runs these laws through the reports' protocol, N
// requests of the use case's shape together, for the capacity; with
// production's requests in flight beside them, for the free requests. Every
// slope is at or above zero (more load never makes a server faster), and the
// fits are robust (Huber): a probe that stalled behind something no term
// counts weighs as its distance.

// Reach is how far past the most requests the data hold together a fitted
// line is trusted to place a threshold: linear physics holds until
// something the data never met (a KV cache filling, a batch past the
// engine's CUDA graphs) bends it, and twice the measured range is where a
// benchmark's own next cell would go. Past it the capacity is a bound.
const Reach = 2.0

// horizon is how much further than the trusted range (Reach times the
// data's) the bounds look for a threshold: a band's optimistic edge
// crosses later than the estimate's line, and is found where the data
// bound it at all. A band that crosses nowhere within it, eight times the
// most requests the data hold together, bounds nothing (Upper +Inf, and
// the estimate is a bound): calibration's next burst goes at most leap
// times the highest level, so such a crossing is no burst's to measure.
const horizon = 4

// laterTurn: a burst's first token that comes more than this share of the
// burst's quickest TTFT after the one before came in a later step of the
// engine. The quickest TTFT lasts at least one step, and the first tokens
// of one step come together, apart by jitter far smaller than a step.
const laterTurn = 0.5

// MinSamples is the fewest observations a law is fitted to from its own
// data: one request alone and one level of requests together give its
// intercept and slope; how far they scatter comes from the target's other
// use cases, or a probe's typical scatter, until there are more
// (fitLinear's scale0). Where the other use cases lend a slope (fitTo),
// one observation and that slope make a law: requiring two there left use
// cases with neither a law nor bounds (docs/capacity.md).
const MinSamples = 2

// queued and decoding are the TTFT law's columns of w, the prompts beside
// it that wait for prefill too, and d, the sequences decoding beside it;
// ttftKV and itlKV each law's column of k.
const (
	queued   = 2
	decoding = 3
	ttftKV   = 4
	itlKV    = 5
	// experts is the ITL law's column of ln b: the weights a step reads
	// for its batch's tokens together, which grow more slowly than the
	// batch where a mixture of experts routes each token to a few of its
	// experts (itlPart).
	experts = 6
	itlCols = experts + 1
)

// curved is the ITL law's column of (b−1)²: a decode step that grows faster
// than the batch once it is compute-bound, or reads a KV cache that grows
// with it. Physics bends it up, never down (held at or above zero).
const curved = 4

// prefilling is the ITL law's column of s.
const prefilling = 3
