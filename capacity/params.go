package capacity

import "math"

// Parameter is one fitted coefficient of the engine model
// (docs/capacity-model.md, "The laws"), named for the API: Law is "ttft"
// or "itl", Symbol the model page's. SE is its standard error from the
// fit, NaN where the data do not vary along it (a slope no burst or
// production has measured yet, held at zero). τd on an idle server is read
// off the other coefficients (decoders), and so is its error.
type Parameter struct {
	Law, Name, Symbol string
	Value, SE         float64
}

// ttftParams and itlParams name the laws' columns, in their order.
var (
	ttftParams = [ttftKV + 1][2]string{
		{"base_seconds", "τ0"},                  // one request's prefill and overhead
		{"per_prompt_ahead_seconds", "τq"},      // each prompt prefilled ahead of it
		{"per_prompt_waiting_seconds", "τw"},    // each prompt waiting for prefill beside it
		{"per_sequence_decoding_seconds", "τd"}, // each sequence decoding beside it
		{"per_kv_ktoken_seconds", "τk"},         // each thousand KV tokens production holds beyond its count's worth
	}
	itlParams = [itlKV + 1][2]string{
		{"step_seconds", "δ0"},                   // one request's decode step
		{"per_sequence_seconds", "δb"},           // each other sequence in the batch
		{"per_request_at_arrival_seconds", "δa"}, // each request in flight on arrival beyond the batch
		{"prefill_step_seconds", "δp"},           // what a step adds while prompts wait for prefill
		{"bend_seconds", "δ2"},                   // times (b−1)²: a step growing faster than the batch
		{"per_kv_ktoken_seconds", "δk"},          // as τk, for each decode step
	}
)

// standardErrors puts a fit's coefficients' standard errors in se, NaN
// for a column it did not fit.
func standardErrors(se []float64, f linearFit, ok bool) {
	for j := range se {
		se[j] = math.NaN()
		if ok && j < len(f.used) && f.used[j] && j < len(f.cov) {
			se[j] = math.Sqrt(f.cov[j][j])
		}
	}
}

// Model is the engine model the estimate was read from, nil before any
// law is fitted: every coefficient of both laws, fitted or held at zero,
// with its standard error.
func (e Estimate) Model() []Parameter {
	f := e.fit
	if f == nil {
		return nil
	}
	var out []Parameter
	add := func(law string, names [][2]string, beta, se []float64) {
		for j, n := range names {
			p := Parameter{Law: law, Name: n[0], Symbol: n[1], SE: math.NaN()}
			if j < len(beta) {
				p.Value = beta[j]
			}
			if j < len(se) {
				p.SE = se[j]
			}
			out = append(out, p)
		}
	}
	add("ttft", ttftParams[:], f.laws.ttft, f.ttftSE[:])
	add("itl", itlParams[:], f.laws.itl, f.itlSE[:])
	return out
}
