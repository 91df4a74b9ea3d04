package capacity

import (
	"encoding/json"
	"math"
	"testing"
)

// An estimate read at an unknown load and then At a load is the estimate
// evaluated at that load: placed, bound, from a bench seed, and with no
// points; fresh memos each time, so that the readings are not shared.
func TestAtIsTheEvaluationAtTheLoad(t *testing.T) {
	l := server{ttft: func(q, w, d float64) float64 { return 0.3 + 1.2*q + 0.05*(w+d) }, itl: func(b, a float64) float64 { return 0.01 + 0.001*(b-1) }}
	u := UseCase{Name: "u", Statistic: "mean", TTFTMax: 8, DecodeMin: 15, InputTokens: 1024, OutputTokens: 64}
	placed := window(l, loads(30, 1, 20), []int{3, 6, 10}, 0.03, 4)
	lone := window(l, loads(10, 1, 3), nil, 0.03, 5)
	var seed []Point
	for _, p := range window(l, nil, []int{2, 5, 9}, 0.03, 6) {
		p.Cell = int(p.Load)
		seed = append(seed, p)
	}
	cases := []struct {
		name         string
		points, seed []Point
	}{{"placed", placed, nil}, {"bound", lone, nil}, {"seeded", lone, seed}, {"none", nil, nil}}
	for _, c := range cases {
		for _, lw := range [][2]float64{{0, 0}, {1, 0}, {5.3, 2}, {30, 10}, {200, 0}, {math.NaN(), math.NaN()}} {
			want := NewMemo().Seeded("a", u, c.points, c.seed, Production{InFlight: lw[0], Waiting: lw[1]})
			got := NewMemo().Seeded("a", u, c.points, c.seed, Unknown).At(Production{InFlight: lw[0], Waiting: lw[1]})
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				t.Errorf("%s at %v: At gives\n%s\nthe evaluation\n%s", c.name, lw, a, b)
			}
			if c.name == "placed" && math.IsNaN(want.Capacity) || c.name == "seeded" && want.Seed == 0 {
				t.Errorf("%s: capacity %v from %d seed points (%s)", c.name, want.Capacity, want.Seed, want.Why)
			}
		}
	}
}
