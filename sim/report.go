package sim

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed testdata/reports/*.json
var reportFS embed.FS

// Figure is one number of a reference report.
type Figure struct {
	// Kind sets the tolerance: key 10%, table 20%, info is printed only.
	Kind    string  `json:"kind"`
	Metric  string  `json:"metric"` // ttft, e2e, itl, queue (s); decode, prefill, throughput (tok/s)
	Mode    string  `json:"mode"`   // closed or burst
	Context int     `json:"context"`
	Output  int     `json:"output"`
	N       int     `json:"n"`
	Value   float64 `json:"value"`
	// Note marks a figure that contradicts the same report's other figures; it
	// is printed, not judged, and not fitted.
	Note string `json:"note,omitempty"`
}

// UseCaseFigure is a report's capacity limit for one use case.
type UseCaseFigure struct {
	Name      string  `json:"name"`
	Context   int     `json:"context"`
	Output    int     `json:"output"`
	TTFTMax   float64 `json:"ttft_max,omitempty"`
	E2EMax    float64 `json:"e2e_max,omitempty"`
	DecodeMin float64 `json:"decode_min,omitempty"`
	Capacity  float64 `json:"capacity"`
	Capped    bool    `json:"capped,omitempty"` // "N+": never breached up to N
}

// SafeQueue is report 004's max safe queue depth: the largest burst whose mean
// TTFT stays within TTFTMax.
type SafeQueue struct {
	Context int     `json:"context"`
	Output  int     `json:"output"`
	TTFTMax float64 `json:"ttft_max"`
	Depth   float64 `json:"depth"`
}

// Report is the data of one reference report.
type Report struct {
	File           string          `json:"report"`
	Profile        string          `json:"profile"`
	Model          string          `json:"model"`
	GPU            string          `json:"gpu"`
	Engine         string          `json:"engine"`
	GPUs           int             `json:"gpus"`
	GPUMemoryGiB   float64         `json:"gpu_memory_gib"`
	TDPWatts       float64         `json:"tdp_watts"`
	MaxConcurrency int             `json:"max_concurrency"`
	Figures        []Figure        `json:"figures"`
	UseCases       []UseCaseFigure `json:"use_cases"`
	SafeQueue      []SafeQueue     `json:"safe_queue,omitempty"`
	// StreamThroughput is true where the report defines system throughput as
	// the sum of its streams' decode speeds (003, 004) rather than output
	// tokens per second of wall time (000-002).
	StreamThroughput bool `json:"stream_throughput,omitempty"`
}

// GPUModel is the GPU's name without the report's count ("1x H200 SXM" -> "H200 SXM").
func (r Report) GPUModel() string {
	if n, rest, ok := strings.Cut(r.GPU, "x "); ok && strings.Trim(n, "0123456789") == "" {
		return rest
	}
	return r.GPU
}

// ReportOf returns the reference report a profile was calibrated from.
func ReportOf(p Profile) (Report, bool) {
	reports, err := Reports()
	if err != nil {
		return Report{}, false
	}
	for _, r := range reports {
		if r.File == p.Report {
			return r, true
		}
	}
	return Report{}, false
}

// Reports returns the embedded reference reports' data, ordered by file.
func Reports() ([]Report, error) {
	entries, err := reportFS.ReadDir("testdata/reports")
	if err != nil {
		return nil, err
	}
	var out []Report
	for _, e := range entries {
		b, err := reportFS.ReadFile(path.Join("testdata/reports", e.Name()))
		if err != nil {
			return nil, err
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("report data %s: %w", e.Name(), err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// Tolerance of a figure kind, as a relative error; 0: not judged.
func Tolerance(kind string) float64 {
	switch kind {
	case "key":
		return 0.10
	case "table":
		return 0.20
	}
	return 0
}

// cellCache keeps the runs that several figures of one report share.
type cellCache map[[4]int]Cell

func (cc cellCache) get(p Params, context, output, n int, burst bool) Cell {
	mode := 0
	if burst {
		mode = 1
	}
	key := [4]int{context, output, n, mode}
	if c, ok := cc[key]; ok {
		return c
	}
	var c Cell
	if burst {
		c = Burst(p, context, output, n)
	} else {
		c = Closed(p, context, output, n)
	}
	cc[key] = c
	return c
}

// Simulate computes a figure's value with the given parameters.
func Simulate(p Params, r Report, f Figure, cells cellCache) float64 {
	c := cells.get(p, f.Context, f.Output, f.N, f.Mode == "burst")
	switch f.Metric {
	case "ttft":
		return c.TTFT
	case "e2e":
		return c.E2E
	case "itl":
		return c.ITL
	case "decode":
		return c.Decode
	case "prefill":
		return c.Prefill
	case "throughput":
		if r.StreamThroughput {
			return c.Decode * float64(f.N)
		}
		if p.ThroughputAccounting > 0 {
			return c.Throughput * p.ThroughputAccounting
		}
		return c.Throughput
	case "queue":
		return c.QueueWait
	}
	return 0
}

// Margin is the smallest relative margin of a cell to a use case's thresholds:
// negative when one is breached.
func (u UseCaseFigure) Margin(c Cell) float64 {
	m := 1.0
	if u.TTFTMax > 0 {
		m = min(m, (u.TTFTMax-c.TTFT)/u.TTFTMax)
	}
	if u.E2EMax > 0 {
		m = min(m, (u.E2EMax-c.E2E)/u.E2EMax)
	}
	if u.DecodeMin > 0 {
		m = min(m, (c.Decode-u.DecodeMin)/u.DecodeMin)
	}
	return m
}

// CapacityLimit is the simulated capacity of a use case with closed loops;
// capped where no closed loop up to SearchTo breaks a threshold.
func CapacityLimit(p Params, u UseCaseFigure) (float64, bool) {
	return capacityLimit(p, u, cellCache{})
}

// SearchTo is the most concurrent requests CapacityLimit tries: four times
// the report's figure, and at least 32.
func (u UseCaseFigure) SearchTo() int { return 4 * int(max(u.Capacity, 8)) }

func capacityLimit(p Params, u UseCaseFigure, cells cellCache) (float64, bool) {
	return Limit(u.SearchTo(), func(n int) float64 { return u.Margin(cells.get(p, u.Context, u.Output, n, false)) })
}

// SafeDepth is the simulated max safe queue depth of a burst.
func SafeDepth(p Params, q SafeQueue) float64 { return safeDepth(p, q, cellCache{}) }

func safeDepth(p Params, q SafeQueue, cells cellCache) float64 {
	d, _ := Limit(4*int(q.Depth), func(n int) float64 {
		return (q.TTFTMax - cells.get(p, q.Context, q.Output, n, true).TTFT) / q.TTFTMax
	})
	return d
}
