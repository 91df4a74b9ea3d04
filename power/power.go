// Package power reads GPU power and energy, from NVML on this host or from a
// DCGM exporter's /metrics, and derives energy per generated token.
package power

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/internal/exposition"
)

// Reading is one GPU now. NaN marks what the source does not report.
type Reading struct {
	Index  string
	UUID   string
	Name   string
	Watts  float64
	Joules float64 // total energy since the driver loaded
	LimitW float64 // enforced power limit
	// MemoryBytes is the GPU's total memory, for a report's hardware card.
	MemoryBytes float64
	Machine     string
}

// Source reads every GPU it sees.
type Source interface {
	Read(ctx context.Context) ([]Reading, error)
	Close()
}

// AllGPUs as a key of a GPU-to-target map gives every unlisted GPU to its target.
const AllGPUs = "*"

// ErrNoNVML means the NVML library is absent: no driver on this host.
var ErrNoNVML = errors.New("NVML library not found (no NVIDIA driver on this host)")

// NVML reads through the NVIDIA Management Library.
type NVML struct{ lib nvml.Interface }

// OpenNVML initialises lib (nvml.New() in production, a mock in tests).
func OpenNVML(lib nvml.Interface) (*NVML, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		return &NVML{lib: lib}, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoNVML
	default:
		return nil, fmt.Errorf("nvml init: %s", lib.ErrorString(ret))
	}
}

// Close shuts NVML down.
func (n *NVML) Close() { n.lib.Shutdown() }

// Read implements Source. A GPU whose power cannot be read is reported with
// NaN fields rather than failing the others.
func (n *NVML) Read(context.Context) ([]Reading, error) {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %s", n.lib.ErrorString(ret))
	}
	out := make([]Reading, 0, count)
	for i := range count {
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d: %s", i, n.lib.ErrorString(ret))
		}
		r := Reading{Index: strconv.Itoa(i), Watts: math.NaN(), Joules: math.NaN(), LimitW: math.NaN(), MemoryBytes: math.NaN()}
		if v, ret := dev.GetUUID(); ret == nvml.SUCCESS {
			r.UUID = v
		}
		if v, ret := dev.GetName(); ret == nvml.SUCCESS {
			r.Name = v
		}
		if mw, ret := dev.GetPowerUsage(); ret == nvml.SUCCESS {
			r.Watts = float64(mw) / 1000
		}
		if mj, ret := dev.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
			r.Joules = float64(mj) / 1000
		}
		if mw, ret := dev.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
			r.LimitW = float64(mw) / 1000
		}
		if m, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			r.MemoryBytes = float64(m.Total)
		}
		out = append(out, r)
	}
	return out, nil
}

// DCGM scrapes an NVIDIA DCGM exporter.
type DCGM struct {
	URL    string
	Client *http.Client
}

// Close implements Source.
func (DCGM) Close() {}

// Read implements Source.
func (d DCGM) Read(ctx context.Context) ([]Reading, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", d.URL, err)
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", d.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d", d.URL, resp.StatusCode)
	}
	return ParseDCGM(resp.Body)
}

// dcgmFields are the DCGM exporter's fields headroom reads.
var dcgmFields = map[string]bool{"DCGM_FI_DEV_POWER_USAGE": true, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": true, "DCGM_FI_DEV_POWER_MGMT_LIMIT": true,
	"DCGM_FI_DEV_FB_FREE": true, "DCGM_FI_DEV_FB_USED": true, "DCGM_FI_DEV_FB_RESERVED": true}

// ParseDCGM reads DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
// (mJ), DCGM_FI_DEV_POWER_MGMT_LIMIT (W) and the frame buffer's free, used
// and reserved MiB (their sum is the GPU's memory), keyed by the gpu and UUID labels,
// from a page of at most 32 MiB.
func ParseDCGM(r io.Reader) ([]Reading, error) {
	mfs, err := exposition.Families(r, 32<<20, func(name string) bool { return dcgmFields[name] })
	if err != nil {
		return nil, fmt.Errorf("dcgm: %w", err)
	}
	if _, ok := mfs["DCGM_FI_DEV_POWER_USAGE"]; !ok {
		return nil, errors.New("no DCGM_FI_DEV_POWER_USAGE on the page")
	}
	byGPU := map[string]*Reading{}
	var order []string
	var bad error
	fill := func(name string, set func(*Reading, float64)) {
		mf, ok := mfs[name]
		if !ok {
			return
		}
		for _, m := range mf.GetMetric() {
			lab := labels(m)
			key := lab["gpu"] + "/" + lab["UUID"]
			rd, ok := byGPU[key]
			if !ok {
				rd = &Reading{Index: lab["gpu"], UUID: lab["UUID"], Name: lab["modelName"], Watts: math.NaN(), Joules: math.NaN(), LimitW: math.NaN(), MemoryBytes: math.NaN(),
					Machine: lab["Hostname"] + lab["hostname"]}
				byGPU[key] = rd
				order = append(order, key)
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				bad = fmt.Errorf("dcgm: %s{%s} has value %g; want a finite, non-negative number", name, exposition.Labels(m), v)
				return
			}
			set(rd, v)
		}
	}
	fill("DCGM_FI_DEV_POWER_USAGE", func(r *Reading, v float64) { r.Watts = v })
	fill("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", func(r *Reading, v float64) { r.Joules = v / 1000 })
	fill("DCGM_FI_DEV_POWER_MGMT_LIMIT", func(r *Reading, v float64) { r.LimitW = v })
	for _, fb := range []string{"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED"} {
		fill(fb, func(r *Reading, v float64) {
			if math.IsNaN(r.MemoryBytes) {
				r.MemoryBytes = 0
			}
			r.MemoryBytes += v * (1 << 20)
		})
	}
	if bad != nil {
		return nil, bad
	}
	out := make([]Reading, 0, len(order))
	for _, k := range order {
		out = append(out, *byGPU[k])
	}
	return out, nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Swappable is a Source that a reload can replace while scrapes read it: the
// old source is closed only once no read is using it.
type Swappable struct {
	mu  sync.RWMutex
	src Source
}

// Read implements Source; with no source, no readings.
func (s *Swappable) Read(ctx context.Context) ([]Reading, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.src == nil {
		return nil, nil
	}
	return s.src.Read(ctx)
}

// Set replaces the source, waiting for reads of the old one to end before
// closing it.
func (s *Swappable) Set(src Source) {
	s.mu.Lock()
	old := s.src
	s.src = src
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// Has reports whether there is a source.
func (s *Swappable) Has() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.src != nil
}

// Close implements Source.
func (s *Swappable) Close() { s.Set(nil) }
