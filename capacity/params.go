package capacity

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// Parameter is one fitted coefficient of the engine model
// (docs/capacity-model.md, "The laws"), named for the API: Law is "ttft"
// or "itl", Symbol the model page's. SE is its standard error from the
// fit, NaN where the data do not vary along it (a slope no burst or
// production has measured yet, held at zero), 0 where the fit held it at
// a bound the probes set (δp: fitITL). τd on an idle server is read
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
	itlParams = [itlCols][2]string{
		{"step_seconds", "δ0"},                   // one request's decode step
		{"per_sequence_seconds", "δb"},           // each other sequence in the batch
		{"per_request_at_arrival_seconds", "δa"}, // each request in flight on arrival beyond the batch
		{"prefill_step_seconds", "δp"},           // what a step adds while prompts wait for prefill
		{"bend_seconds", "δ2"},                   // times (b−1)²: a step growing faster than the batch
		{"per_kv_ktoken_seconds", "δk"},          // as τk, for each decode step
		{"log_batch_seconds", "δe"},              // times ln b: a step growing more slowly than the batch (a mixture of experts)
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
// with its standard error, and last the lag its twin ran with.
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
	// The lag is the twin's (twin.lag), pooled over the target's use cases
	// (Prior.Lag), not this fit's: it splits τ0, and has no error of its own.
	// The levelling's shape is the fit's search (saturation), no
	// coefficient: it has no error.
	return append(out, Parameter{Law: "ttft", Name: lagParam[0], Symbol: lagParam[1], Value: f.laws.lag, SE: math.NaN()},
		Parameter{Law: "itl", Name: shareParam[0], Symbol: shareParam[1], Value: f.laws.saturate, SE: math.NaN()})
}

// lagParam names the part of τ0 before the engine takes the prompt.
var lagParam = [2]string{"lag_seconds", "λ"}

// shareParam names the shape of a step's levelling (levelColumn's r): the
// share k/E of its experts a token is routed to, 0 where δe multiplies
// ln b.
var shareParam = [2]string{"expert_share", "k/E"}

// KVCache is the KV cache in tokens the estimate's twin admitted requests
// by (UseCase.KVTokens), 0 where the engine does not say or no law is
// fitted: with the points, what Replay needs to read them as the daemon did.
func (e Estimate) KVCache() float64 {
	if e.fit == nil || !(e.fit.laws.kv > 0) {
		return 0
	}
	return e.fit.laws.kv
}

// terms say what each of the model's coefficients is charged for, by law
// and name (capacity.Parameter); the base of each law has none.
var terms = map[string]string{
	"ttft/per_prompt_ahead_seconds":      "per prompt ahead",
	"ttft/per_prompt_waiting_seconds":    "per prompt waiting beside",
	"ttft/per_sequence_decoding_seconds": "per sequence decoding",
	"ttft/per_kv_ktoken_seconds":         "per 1K KV tokens beyond production's count",
	"itl/per_sequence_seconds":           "per sequence in the batch",
	"itl/per_request_at_arrival_seconds": "per request in flight on arrival",
	"itl/prefill_step_seconds":           "while prompts wait for prefill",
	"itl/bend_seconds":                   "× (batch − 1)²",
	"itl/log_batch_seconds":              "× ln batch",
	"itl/per_kv_ktoken_seconds":          "per 1K KV tokens beyond production's count",
}

// Describe writes the fitted model as a sum per law, each term with its
// standard error: the terms the data measured (a slope held at zero, never
// measured, or smaller than its error, which the data cannot tell from
// zero, is left out, and so is a law with no data at all); a slope held at
// a bound the probes set (SE 0) says so, and τ0 says the part of it
// before the engine takes the prompt (the lag), where there is one. ""
// before any law is fitted.
func Describe(ps []Parameter) string {
	var ttft, itl []string
	isLag := func(p Parameter) bool { return p.Law == "ttft" && p.Name == lagParam[0] }
	isShare := func(p Parameter) bool { return p.Law == "itl" && p.Name == shareParam[0] }
	lag, share := 0.0, 0.0
	if i := slices.IndexFunc(ps, isLag); i >= 0 {
		lag = ps[i].Value
	}
	if i := slices.IndexFunc(ps, isShare); i >= 0 {
		share = ps[i].Value
	}
	for _, p := range ps {
		if isLag(p) || isShare(p) {
			continue // a part of τ0, or δe's shape: said with them
		}
		term, slope := terms[p.Law+"/"+p.Name]
		if p.Law == "itl" && p.Name == "log_batch_seconds" && share > 0 {
			term = "× experts read beyond one token's (k/E " + significant(share, 3) + ")"
		}
		// A slope shows where the data measured it above zero; a law's
		// base wherever it has a value or an error.
		if slope && (p.Value == 0 || math.IsNaN(p.SE) || p.SE > p.Value) || !slope && p.Value == 0 && math.IsNaN(p.SE) {
			continue
		}
		var notes []string
		if p.Law == "ttft" && !slope && lag > 0 {
			notes = append(notes, seconds(lag, math.NaN())+" of it before the engine takes the prompt")
		}
		var t string
		switch {
		case slope && p.SE == 0:
			t = seconds(p.Value, math.NaN(), "at its bound")
		case !slope && p.Value < 0:
			// A line fitted where the server was never idle can cross zero
			// before one request: the base is where the line points, not a
			// lone request's time, which the page would otherwise seem to say.
			t = seconds(p.Value, p.SE, append(notes, "below zero: the line's, over the loads measured")...)
		default:
			t = seconds(p.Value, p.SE, notes...)
		}
		if term != "" {
			t += " " + term
		}
		if p.Law == "itl" {
			itl = append(itl, t)
		} else {
			ttft = append(ttft, t)
		}
	}
	var sums []string
	if len(ttft) > 0 {
		sums = append(sums, "TTFT = "+strings.Join(ttft, " + "))
	}
	if len(itl) > 0 {
		sums = append(sums, "decode step = "+strings.Join(itl, " + "))
	}
	return strings.Join(sums, "; ")
}

// seconds writes a time in s, ms or µs, whichever puts it at 1 or more,
// to three significant digits, and in parentheses its error (NaN: none) in
// the same unit and the notes, each after a "; ".
func seconds(v, se float64, notes ...string) string {
	unit, scale := "s", 1.0
	switch a := math.Abs(v); {
	case a >= 1 || a == 0:
	case a >= 1e-3:
		unit, scale = "ms", 1e3
	default:
		unit, scale = "µs", 1e6
	}
	var in []string
	if !math.IsNaN(se) {
		in = append(in, "± "+significant(se*scale, 2))
	}
	in = append(in, notes...)
	out := significant(v*scale, 3) + " " + unit
	if len(in) > 0 {
		out += " (" + strings.Join(in, "; ") + ")"
	}
	return out
}

// significant writes x to n significant digits, never as an exponent.
func significant(x float64, n int) string {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	decimals := n - 1 - int(math.Floor(math.Log10(math.Abs(x))))
	if decimals < 0 {
		// Past the point: round to n digits, zeros after them.
		unit := math.Pow10(-decimals)
		x, decimals = math.Round(x/unit)*unit, 0
	}
	return strconv.FormatFloat(x, 'f', decimals, 64)
}
