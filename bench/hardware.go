package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/headroom-dev/headroom/power"
)

// Hardware is what the server runs on, as its power source reports it: the
// reference reports' "test hardware" card. The model and engine are the
// Target's.
type Hardware struct {
	GPU         string  `json:"gpu,omitempty"` // the GPUs' names, once each
	GPUs        int     `json:"gpus,omitempty"`
	MemoryGiB   float64 `json:"memory_gib,omitempty"`    // per GPU; 0: not reported
	PowerLimitW float64 `json:"power_limit_w,omitempty"` // per GPU; 0: not reported
}

// hardwareOf summarises the power source's readings of the server's GPUs.
func hardwareOf(gpus []power.Reading) *Hardware {
	if len(gpus) == 0 {
		return nil
	}
	h := &Hardware{GPUs: len(gpus)}
	var names []string
	for _, g := range gpus {
		if g.Name != "" && !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
		if !math.IsNaN(g.MemoryBytes) {
			h.MemoryGiB = max(h.MemoryGiB, g.MemoryBytes/(1<<30))
		}
		if !math.IsNaN(g.LimitW) {
			h.PowerLimitW = max(h.PowerLimitW, g.LimitW)
		}
	}
	h.GPU = strings.Join(names, ", ")
	return h
}

// String describes the hardware in a line, leaving out what was not reported.
func (h Hardware) String() string {
	name := h.GPU
	if name == "" {
		name = "GPU (name not reported)"
	}
	s := fmt.Sprintf("%dx %s", h.GPUs, name)
	if h.MemoryGiB > 0 {
		s += fmt.Sprintf(", %.0f GiB each", h.MemoryGiB)
	}
	if h.PowerLimitW > 0 {
		s += fmt.Sprintf(", %.0f W power limit each", h.PowerLimitW)
	}
	return s
}
