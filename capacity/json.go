package capacity

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// num writes NaN and infinities as null: JSON has no such numbers. It
// reads null back as NaN.
type num float64

// UnmarshalJSON implements json.Unmarshaler.
func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = num(math.NaN())
		return nil
	}
	var f float64
	err := json.Unmarshal(b, &f)
	*n = num(f)
	return err
}

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// MarshalJSON implements json.Marshaler.
func (k Knot) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Load  num `json:"load"`
		Value num `json:"value"`
		N     int `json:"samples"`
	}{num(k.Load), num(k.Value), k.N})
}

// MarshalJSON implements json.Marshaler.
func (s SLO) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name      string `json:"slo"`
		Threshold num    `json:"threshold"`
		Value     num    `json:"value"`
		Margin    num    `json:"margin"`
		Capacity  num    `json:"capacity"`
		Lower     num    `json:"capacity_lower"`
		Upper     num    `json:"capacity_upper"`
		Curve     Curve  `json:"curve"`
		Why       string `json:"why,omitempty"`
	}{s.Name, num(s.Threshold), num(s.Value), num(s.Margin), num(s.Capacity), num(s.Lower), num(s.Upper), s.Curve, s.Why})
}

// model is an estimate's parameters as JSON, each law's by name:
// {"ttft": {"base_seconds": {"value": 0.8, "se": 0.02, "symbol": "τ0"}, ...}, "itl": {...}};
// nil (left out) without one.
func model(ps []Parameter) any {
	if len(ps) == 0 {
		return nil
	}
	type param struct {
		Value  num    `json:"value"`
		SE     num    `json:"se"`
		Symbol string `json:"symbol"`
	}
	out := map[string]map[string]param{}
	for _, p := range ps {
		if out[p.Law] == nil {
			out[p.Law] = map[string]param{}
		}
		out[p.Law][p.Name] = param{num(p.Value), num(p.SE), p.Symbol}
	}
	return out
}

// MarshalJSON implements json.Marshaler.
func (e Estimate) MarshalJSON() ([]byte, error) {
	pts := make([]pointJSON, len(e.Points))
	for i, p := range e.Points {
		pts[i] = p.json()
	}
	next := ""
	if !e.NextProbe.IsZero() {
		next = e.NextProbe.UTC().Format(time.RFC3339)
	}
	return json.Marshal(struct {
		Target   string `json:"target"`
		UseCase  string `json:"use_case"`
		Scenario string `json:"scenario"`
		Capacity num    `json:"capacity"`
		Lower    num    `json:"capacity_lower"`
		Upper    num    `json:"capacity_upper"`
		Bound    string `json:"bound,omitempty"`
		Aim      num    `json:"aim"`
		Reach    num    `json:"reach"`
		Load     num    `json:"load"`
		Free     num    `json:"free"`
		Ratio    num    `json:"ratio"`
		Margin   num    `json:"margin"`
		Samples  int    `json:"samples"`
		Needed   int    `json:"samples_needed"`
		Next     string `json:"next_probe,omitempty"`
		Seed     int    `json:"seed_points,omitempty"`
		Why      string `json:"why,omitempty"`
		Limit    int    `json:"burst_limit,omitempty"`
		LimitBy  string `json:"burst_limit_by,omitempty"`
		SLOs     []SLO  `json:"slos"`
		Model    any    `json:"model,omitempty"`
		KVCache  num    `json:"kv_cache_tokens,omitempty"`
		Points   any    `json:"points"`
	}{e.Target, e.UseCase, e.Scenario, num(e.Capacity), num(e.Lower), num(e.Upper), e.Bound, num(e.Aim), num(e.Reach), num(e.Load), num(e.Free), num(e.Ratio), num(e.Margin), e.Samples, e.SamplesNeeded, next, e.Seed, e.Why, e.BurstLimit, e.BurstLimitBy, e.SLOs, model(e.Model()), num(e.KVCache()), pts})
}

// pointJSON is a Point as /api/v1/status writes it, and as Replay reads it
// back: every field the model reads, NaN as null.
type pointJSON struct {
	Time      string `json:"time"`
	Load      num    `json:"load"`
	InFlight  num    `json:"in_flight"`
	Sent      num    `json:"sent,omitempty"`
	KV        num    `json:"kv_tokens,omitempty"`
	Held      num    `json:"kv_held,omitempty"`
	TTFT      num    `json:"ttft_s"`
	E2E       num    `json:"e2e_s"`
	ITL       num    `json:"itl_s"`
	Steady    num    `json:"steady_itl_s,omitempty"`
	MaxGap    num    `json:"max_gap_s,omitempty"`
	Decode    num    `json:"decode_tps"`
	Burst     int    `json:"burst,omitempty"`
	Level     num    `json:"level,omitempty"`
	Queued    num    `json:"queued_prompt_tokens,omitempty"`
	Rise      num    `json:"production_rise,omitempty"`
	Cell      int    `json:"cell,omitempty"`
	Aftermath bool   `json:"aftermath,omitempty"`
	Lost      bool   `json:"lost,omitempty"`
}

// pointTime is a point's time in JSON: milliseconds, as a probe's.
const pointTime = "2006-01-02T15:04:05.000Z07:00"

func (p Point) json() pointJSON {
	return pointJSON{Time: p.Time.UTC().Format(pointTime), Load: num(p.Load), InFlight: num(p.InFlight), Sent: num(p.Sent), KV: num(p.KV), Held: num(p.Held),
		TTFT: num(p.TTFT), E2E: num(p.E2E), ITL: num(p.ITL), Steady: num(p.Steady), MaxGap: num(p.MaxGap), Decode: num(p.Decode), Burst: p.Burst, Level: num(p.Level), Queued: num(p.Queued), Rise: num(p.Rise), Cell: p.Cell,
		Aftermath: p.Aftermath, Lost: p.Lost}
}

// UnmarshalJSON implements json.Unmarshaler: a point of /api/v1/status.
func (p *Point) UnmarshalJSON(b []byte) error {
	var j pointJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("point's time: %w", err)
	}
	*p = Point{Time: t, Load: float64(j.Load), InFlight: float64(j.InFlight), Sent: float64(j.Sent), KV: float64(j.KV), Held: float64(j.Held),
		TTFT: float64(j.TTFT), E2E: float64(j.E2E), ITL: float64(j.ITL), Steady: float64(j.Steady), MaxGap: float64(j.MaxGap), Decode: float64(j.Decode), Burst: j.Burst, Level: float64(j.Level), Queued: float64(j.Queued), Rise: float64(j.Rise), Cell: j.Cell,
		Aftermath: j.Aftermath, Lost: j.Lost}
	return nil
}
