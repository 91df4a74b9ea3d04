package capacity

import (
	"math"
	"sort"
)

// Burst is the size of the calibration burst a use case wants now: how many
// concurrent probes of its scenario to send at once, 0 for none. A burst adds
// points at a load production has not shown, so it is wanted only while the
// capacity is unknown, never while an SLO is breached (more load would only
// hurt), and only at a quiet moment: the load now no higher than the window's
// median. Each burst reaches twice the highest load observed so far, at least
// MinSpread+1 requests above now, at most maxBurst probes.
func Burst(e Estimate, load float64, maxBurst int) int {
	if maxBurst < 2 || !math.IsNaN(e.Capacity) || len(e.Points) == 0 || math.IsNaN(load) || e.Margin < 0 {
		return 0
	}
	loads := make([]float64, 0, len(e.Points))
	for _, p := range e.Points {
		if !math.IsNaN(p.Load) {
			loads = append(loads, p.Load)
		}
	}
	if len(loads) == 0 {
		return 0
	}
	sort.Float64s(loads)
	if load > loads[len(loads)/2] {
		return 0
	}
	want := max(int(math.Ceil(2*loads[len(loads)-1]-load)), int(MinSpread)+1)
	return min(want, maxBurst)
}
