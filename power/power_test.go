package power

import (
	"context"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func device(uuid string, mw uint32, mj uint64, limit uint32, powerRet nvml.Return) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:                   func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc:                   func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetPowerUsageFunc:             func() (uint32, nvml.Return) { return mw, powerRet },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) { return mj, nvml.SUCCESS },
		GetEnforcedPowerLimitFunc:     func() (uint32, nvml.Return) { return limit, nvml.SUCCESS },
		GetMemoryInfoFunc:             func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 141 << 30}, nvml.SUCCESS },
	}
}

func library(initRet nvml.Return, devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return initRet },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		ErrorStringFunc:    func(r nvml.Return) string { return "error " + r.String() },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return devs[i], nvml.SUCCESS
		},
	}
}

func TestNVML(t *testing.T) {
	lib := library(nvml.SUCCESS,
		device("GPU-aaaa", 612_500, 9_000_000, 700_000, nvml.SUCCESS),
		device("GPU-bbbb", 0, 1_000, 700_000, nvml.ERROR_NOT_SUPPORTED))
	n, err := OpenNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	rs, err := n.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d readings", len(rs))
	}
	if r := rs[0]; r.Index != "0" || r.UUID != "GPU-aaaa" || r.Watts != 612.5 || r.Joules != 9000 || r.LimitW != 700 || r.MemoryBytes != 141<<30 {
		t.Errorf("GPU 0 = %+v (NVML gives mW and mJ)", r)
	}
	if r := rs[1]; !math.IsNaN(r.Watts) || r.Joules != 1 {
		t.Errorf("GPU 1 = %+v: an unsupported reading must be NaN, not 0", r)
	}
	if len(lib.ShutdownCalls()) != 0 {
		t.Error("shut down too early")
	}
}

func TestNVMLLibraryNotFound(t *testing.T) {
	if _, err := OpenNVML(library(nvml.ERROR_LIBRARY_NOT_FOUND)); err != ErrNoNVML {
		t.Fatalf("err = %v, want ErrNoNVML", err)
	}
	if _, err := OpenNVML(library(nvml.ERROR_DRIVER_NOT_LOADED)); err == nil {
		t.Fatal("driver not loaded: no error")
	}
}

func TestParseDCGM(t *testing.T) {
	f, err := os.Open("testdata/dcgm.prom")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := ParseDCGM(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].UUID != "GPU-1111" || rs[0].Watts != 301.5 || rs[0].Joules != 123456.789 || rs[0].LimitW != 700 || rs[1].Index != "1" {
		t.Fatalf("readings %+v", rs)
	}
	// Free, used and reserved frame buffer add up to the GPU's memory; a GPU
	// without them has none known rather than 0.
	if rs[0].MemoryBytes != 144500<<20 || !math.IsNaN(rs[1].MemoryBytes) {
		t.Errorf("memory %g and %g bytes, want %d and NaN", rs[0].MemoryBytes, rs[1].MemoryBytes, 144500<<20)
	}
}

func TestPerToken(t *testing.T) {
	p := NewPerToken(5 * time.Minute)
	t0 := time.Unix(0, 0)
	if v := p.Observe("a", t0, 1000, 100); !math.IsNaN(v) {
		t.Errorf("first point: %v, want NaN", v)
	}
	if v := p.Observe("a", t0.Add(time.Minute), 1600, 300); v != 3 {
		t.Errorf("600 J over 200 tokens = %v, want 3", v)
	}
	if v := p.Observe("a", t0.Add(2*time.Minute), 100, 10); !math.IsNaN(v) {
		t.Errorf("after a counter reset: %v, want NaN", v)
	}
	if v := p.Observe("a", t0.Add(3*time.Minute), math.NaN(), 20); !math.IsNaN(v) {
		t.Errorf("unknown energy: %v", v)
	}
}

func TestParseDCGMRejectsBadPages(t *testing.T) {
	tests := []struct{ name, page, err string }{
		{"JSON body", "{}", "truncated"},
		{"nameless line", "{} 1\n", "no metric name"},
		{"+Inf power", "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} +Inf\n", "has value +Inf"},
		{"negative energy", "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} 300\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\"} -1\n", "has value -1"},
		{"duplicate GPU", "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} 300\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} 200\n", "duplicate series"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDCGM(strings.NewReader(tc.page))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// FuzzParseDCGM: a garbled DCGM page gives readings or an error, never a panic.
func FuzzParseDCGM(f *testing.F) {
	b, err := os.ReadFile("testdata/dcgm.prom")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, page []byte) {
		rs, err := ParseDCGM(strings.NewReader(string(page)))
		for _, r := range rs {
			if err == nil && (r.Watts < 0 || math.IsInf(r.Watts, 0)) {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

// closeCheck is a source that fails the test if read after Close.
type closeCheck struct {
	t      *testing.T
	mu     sync.Mutex
	closed bool
}

func (c *closeCheck) Read(context.Context) ([]Reading, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		c.t.Error("read after close")
	}
	time.Sleep(time.Millisecond) // a read that takes time, as NVML's does
	return []Reading{{Watts: 1}}, nil
}

func (c *closeCheck) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// A reload replaces the source while scrapes read it: the old one is closed
// only after its reads end.
func TestSwappableClosesAfterReads(t *testing.T) {
	var s Swappable
	s.Set(&closeCheck{t: t})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				if _, err := s.Read(t.Context()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 20 {
		s.Set(&closeCheck{t: t})
	}
	wg.Wait()
	s.Close()
	if s.Has() {
		t.Error("a closed Swappable still has a source")
	}
}
