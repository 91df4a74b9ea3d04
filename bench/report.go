// Package bench runs the capacity sweep of the reference reports against an
// OpenAI-compatible server: every context length x concurrency level in a
// closed loop, report 004's bursts, a capacity limit per use case, and the
// report itself as JSON, CSV, Markdown and self-contained HTML.
package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/headroom-dev/headroom/capacity"
)

// Schema is the version of report.json. A reader refuses other versions
// rather than misread them; bump it on any incompatible change.
const Schema = 1

// Report is a whole sweep: what was asked, every measured cell, and the
// capacity limits derived from them. It is complete enough to resume a
// killed sweep and to redraw every output without the server.
type Report struct {
	Schema  int       `json:"schema"`
	Tool    string    `json:"tool"` // headroom version that wrote it
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	Target  Target    `json:"target"`
	// TimeScale > 1: the server is a time-scaled `headroom sim`; every time
	// and rate in this report is virtual (simulated), converted from wall time.
	TimeScale float64   `json:"time_scale"`
	Plan      Plan      `json:"plan"`
	Cells     []Cell    `json:"cells"`
	Limits    []Limit   `json:"limits"`
	SafeQueue []Depth   `json:"safe_queue,omitempty"`
	Complete  bool      `json:"complete"` // false: interrupted; run again with the same --out to resume
	Power     string    `json:"power,omitempty"`
	Hardware  *Hardware `json:"hardware,omitempty"`
	// EnergyPrice is the electricity price per kWh the highlights cost the
	// GPUs' power at; 0: no cost shown.
	EnergyPrice float64 `json:"energy_price_kwh,omitempty"`
	// pooled is one cell per key over all its runs: what the report shows.
	pooled []Cell
}

// Target is the server benchmarked. The API key is never part of it.
type Target struct {
	URL    string `json:"url"`
	API    string `json:"api"`
	Model  string `json:"model"`
	Engine string `json:"engine"` // as detected from the server's metrics where asked for auto
}

// Cell is one context length, output length and load: a closed loop or a
// burst of a concurrency, or open-loop arrivals at a rate.
type Cell struct {
	Key
	Requests []Request      `json:"requests"`
	Failures map[string]int `json:"failures,omitempty"` // outcome -> count
	// Errors keeps each outcome's first error (redacted), so a report says
	// why its requests failed.
	Errors   map[string]string `json:"errors,omitempty"`
	Duration float64           `json:"duration_s"` // first request sent -> last finished
	Queue    *float64          `json:"queue_wait_s,omitempty"`
	Energy   *float64          `json:"energy_j,omitempty"`
	Stats    map[string]Values `json:"stats"` // metric -> statistics, derived from Requests
	// Throughput is output tokens per second of the cell's duration, summed
	// over its requests: the system throughput of reports 000-002.
	Throughput float64 `json:"throughput_tps"`
	// Efficiency is Throughput / (single-request throughput x concurrency), 0 when no single-request cell exists.
	Efficiency     float64    `json:"scaling_efficiency,omitempty"`
	SuccessRate    float64    `json:"success_rate"`
	Watts          *float64   `json:"power_w,omitempty"`
	JoulesPerToken *float64   `json:"energy_j_per_token,omitempty"`
	Rate           *RateStats `json:"open_loop,omitempty"` // open-loop cells only
	// Goodput is, per use case at the cell's lengths, the share of its
	// requests that met every threshold of the use case.
	Goodput map[string]float64 `json:"goodput,omitempty"`
	// Runs and CI are set on the report's pooled view of a repeated cell:
	// how many runs it pools, and per figure (a metric's mean, or
	// throughput_tps) the half-width of the 95% confidence interval of its
	// mean over the runs.
	Runs int                `json:"-"`
	CI   map[string]float64 `json:"-"`
}

// Key names a cell.
type Key struct {
	Mode        string `json:"mode"` // closed, burst or rate
	Context     int    `json:"context"`
	Output      int    `json:"output"`
	Concurrency int    `json:"concurrency"`
	// Rate is an open-loop cell's requests per second (Mode "rate"; Concurrency 0).
	Rate float64 `json:"rate_rps,omitempty"`
	// Run numbers the repetitions of a cell (Plan.Repeat), from 0.
	Run int `json:"run,omitempty"`
}

func (k Key) String() string {
	s := fmt.Sprintf("%s ctx=%d out=%d n=%d", k.Mode, k.Context, k.Output, k.Concurrency)
	if k.Mode == "rate" {
		s = fmt.Sprintf("rate ctx=%d out=%d rate=%g/s", k.Context, k.Output, k.Rate)
	}
	if k.Run > 0 {
		s += fmt.Sprintf(" run=%d", k.Run+1)
	}
	return s
}

// X is the cell's load on a chart's x axis: its concurrency, or its rate.
func (k Key) X() float64 {
	if k.Mode == "rate" {
		return k.Rate
	}
	return float64(k.Concurrency)
}

// Request is one measured request. Times are seconds (virtual on a time-scaled simulator).
type Request struct {
	Start        float64 `json:"start_s"` // since the cell began
	TTFT         float64 `json:"ttft_s"`
	E2E          float64 `json:"e2e_s"`
	ITL          float64 `json:"itl_s"`
	Decode       float64 `json:"decode_tps"`
	Prefill      float64 `json:"prefill_tps"`
	PromptTokens int     `json:"prompt_tokens"`
	OutputTokens int     `json:"output_tokens"`
}

// Metrics that have statistics per cell, and how each is read off a request.
var Metrics = []struct {
	Name  string
	Value func(Request) float64
}{
	{"ttft_s", func(r Request) float64 { return r.TTFT }},
	{"itl_s", func(r Request) float64 { return r.ITL }},
	{"decode_tps", func(r Request) float64 { return r.Decode }},
	{"e2e_s", func(r Request) float64 { return r.E2E }},
	{"prefill_tps", func(r Request) float64 { return r.Prefill }},
}

// Values are a metric's statistics over a cell's requests.
type Values struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
}

// Get returns the named statistic: mean, p50, p90, p95 or p99.
func (v Values) Get(stat string) float64 {
	switch stat {
	case "p50":
		return v.P50
	case "p90":
		return v.P90
	case "p95":
		return v.P95
	case "p99":
		return v.P99
	}
	return v.Mean
}

// Cell returns the cell with this key, pooled over its runs.
func (r *Report) Cell(k Key) (*Cell, bool) {
	k.Run = 0
	view := r.view()
	for i := range view {
		if view[i].Key == k {
			return &view[i], true
		}
	}
	return nil, false
}

// measured reports whether the run of a cell that k names was measured.
func (r *Report) measured(k Key) bool {
	for i := range r.Cells {
		if r.Cells[i].Key == k {
			return true
		}
	}
	return false
}

// Load reads a report.json written by this version of headroom. Every
// number is checked (validate), errors naming the field's path, and the
// statistics and limits are derived from the cells.
func Load(path string) (*Report, error) {
	b, err := readRegular(path, maxReport)
	if err != nil {
		return nil, fmt.Errorf("read bench report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench report %s: %w", path, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("bench report %s: schema %d, this headroom reads schema %d", path, r.Schema, Schema)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("bench report %s: %w", path, err)
	}
	// What the file says of statistics and limits is derived anew from
	// its cells: only those were checked.
	r.Derive()
	return &r, nil
}

// maxReport bounds a report file: the largest sweeps write a few MB.
const maxReport = 256 << 20

// readRegular reads a regular file of at most limit bytes. A FIFO or a device
// (/dev/zero) named by mistake is refused instead of hanging or filling memory.
func readRegular(path string, limit int64) ([]byte, error) {
	// Stat before open: opening a FIFO blocks until a writer comes.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d", path, st.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// Save writes the report atomically: a sweep killed mid-write keeps the last
// complete file to resume from.
func (r *Report) Save(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("encode bench report: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.json")
	if err != nil {
		return fmt.Errorf("save bench report: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	merr := tmp.Chmod(0o644) // CreateTemp's 0600 would hide the report from its readers
	cerr := tmp.Close()
	if err := errors.Join(werr, merr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save bench report: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save bench report: %w", err)
	}
	return nil
}

// Points are the closed-loop requests at one context and output length as
// the daemon's capacity model takes probes: each at the load it met, the
// cell's concurrency. They seed `headroom serve` (targets[].capacity_seed).
func (r *Report) Points(context, output int) []capacity.Point {
	var out []capacity.Point
	for i, c := range r.ladder("closed", context, output) {
		for _, q := range c.Requests { // every run's
			n := float64(c.Concurrency)
			out = append(out, capacity.Point{Load: n, InFlight: n, TTFT: q.TTFT, E2E: q.E2E, ITL: q.ITL, Decode: q.Decode, Burst: c.Concurrency, Cell: i + 1})
		}
	}
	return out
}
