package capacity

import (
	"fmt"
	"math"
	"time"
)

// UseCase is what a use case demands: thresholds (0: not checked) judged on
// the statistic of a scenario's probes over a window.
type UseCase struct {
	Name, Scenario string
	Statistic      string
	Window         time.Duration
	TTFTMax        float64 // seconds
	E2EMax         float64 // seconds
	ITLMax         float64 // seconds
	DecodeMin      float64 // tokens/s
}

// Limits of the estimate.
const (
	MinSamples = 8   // probes in the window before a capacity is estimated
	MinSpread  = 2.0 // observed loads must span at least this many requests
	Reach      = 2.0 // extrapolate at most to this multiple of the highest observed load
)

// SLO is one threshold of a use case, as exported in headroom_slo_threshold.
type SLO struct {
	Name      string  `json:"slo"` // ttft_seconds, e2e_seconds, itl_seconds, decode_tokens_per_second
	Threshold float64 `json:"threshold"`
	// Value is the window's statistic, Margin its relative distance to the threshold.
	Value  float64 `json:"value"`
	Margin float64 `json:"margin"`
	// Capacity is the load at which the fitted curve reaches the threshold.
	Capacity float64 `json:"capacity"`
	Curve    Curve   `json:"curve"`
	Why      string  `json:"why,omitempty"`
}

// Estimate is the state of one target and use case.
type Estimate struct {
	Target   string  `json:"target"`
	UseCase  string  `json:"use_case"`
	Scenario string  `json:"scenario"`
	Capacity float64 `json:"capacity"` // NaN when unknown; see Why
	Load     float64 `json:"load"`     // requests in flight now, NaN if unknown
	Free     float64 `json:"free"`
	Ratio    float64 `json:"ratio"`
	Margin   float64 `json:"margin"` // smallest SLO margin over the window; < 0: breached
	Samples  int     `json:"samples"`
	// Seed counts the bench points the estimate also rests on; 0: probes alone.
	Seed   int     `json:"seed_points,omitempty"`
	Why    string  `json:"why,omitempty"`
	SLOs   []SLO   `json:"slos"`
	Points []Point `json:"points"`
}

// SLOs lists a use case's configured thresholds.
func (u UseCase) SLOs() []SLO {
	var out []SLO
	add := func(name string, v float64) {
		if v > 0 {
			out = append(out, SLO{Name: name, Threshold: v})
		}
	}
	add("ttft_seconds", u.TTFTMax)
	add("e2e_seconds", u.E2EMax)
	add("itl_seconds", u.ITLMax)
	add("decode_tokens_per_second", u.DecodeMin)
	return out
}

func metric(name string) (value func(Point) float64, increasing bool) {
	switch name {
	case "ttft_seconds":
		return func(p Point) float64 { return p.TTFT }, true
	case "e2e_seconds":
		return func(p Point) float64 { return p.E2E }, true
	case "itl_seconds":
		return func(p Point) float64 { return p.ITL }, true
	}
	return func(p Point) float64 { return p.Decode }, false
}

// Evaluate estimates a use case from its window's points at the current load.
func Evaluate(target string, u UseCase, points []Point, load float64) Estimate {
	e := Estimate{Target: target, UseCase: u.Name, Scenario: u.Scenario, Capacity: math.NaN(), Load: load,
		Free: math.NaN(), Ratio: math.NaN(), Margin: math.NaN(), Samples: len(points), Points: points}
	e.SLOs = u.SLOs()
	if len(points) == 0 {
		e.Why = "no successful probe in the window"
		return e
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range points {
		if !math.IsNaN(p.Load) {
			lo, hi = math.Min(lo, p.Load), math.Max(hi, p.Load)
		}
	}
	spread := hi - lo
	e.Margin = math.Inf(1)
	// An SLO whose curve does not reach its threshold within Reach holds up to
	// there, so it does not bound the capacity; too little data bounds nothing.
	capacity, insufficient := math.Inf(1), false
	for i := range e.SLOs {
		s := &e.SLOs[i]
		value, increasing := metric(s.Name)
		vs := make([]float64, len(points))
		for j, p := range points {
			vs[j] = value(p)
		}
		s.Value = Statistic(vs, u.Statistic)
		if increasing {
			s.Margin = (s.Threshold - s.Value) / s.Threshold
		} else {
			s.Margin = (s.Value - s.Threshold) / s.Threshold
		}
		e.Margin = math.Min(e.Margin, s.Margin)
		s.Capacity = math.NaN()
		switch {
		case len(points) < MinSamples:
			s.Why = fmt.Sprintf("%d samples in the window, %d needed", len(points), MinSamples)
			insufficient = true
		case !(spread >= MinSpread):
			s.Why = fmt.Sprintf("observed load spans %.1f requests, %.0f needed", math.Max(0, spread), MinSpread)
			insufficient = true
		default:
			s.Curve = isotonic(bin(points, value, u.Statistic), increasing)
			if c, ok := s.Curve.crossing(s.Threshold, increasing, Reach); ok {
				s.Capacity = c
				capacity = math.Min(capacity, c)
			} else {
				s.Why = fmt.Sprintf("threshold not reached up to %.0fx the highest observed load (%.1f)", Reach, hi)
			}
		}
		if s.Why != "" && e.Why == "" {
			e.Why = s.Name + ": " + s.Why
		}
	}
	if !insufficient && !math.IsInf(capacity, 1) {
		e.Capacity = capacity
		e.Why = ""
	}
	if !math.IsNaN(e.Capacity) && !math.IsNaN(load) {
		e.Free = e.Capacity - load
		if e.Capacity > 0 {
			e.Ratio = 1 - load/e.Capacity
		} else {
			e.Ratio = math.Inf(-1)
		}
	}
	return e
}

// Seeded evaluates with a benchmark's points (a `headroom bench` run of the
// same server, load = its concurrency) as a prior: while the window's probes
// alone cannot carry an estimate, probes and bench points together do. The
// margins stay those of the probes at the current load.
func Seeded(target string, u UseCase, points, seed []Point, load float64) Estimate {
	e := Evaluate(target, u, points, load)
	if !math.IsNaN(e.Capacity) || len(seed) == 0 {
		return e
	}
	s := Evaluate(target, u, append(append([]Point(nil), seed...), points...), load)
	if math.IsNaN(s.Capacity) {
		return e
	}
	for i := range s.SLOs {
		s.SLOs[i].Value, s.SLOs[i].Margin = e.SLOs[i].Value, e.SLOs[i].Margin
	}
	s.Margin, s.Samples, s.Points, s.Seed = e.Margin, e.Samples, e.Points, len(seed)
	s.Why = "capacity from the bench seed and probes; probes alone: " + e.Why
	return s
}
