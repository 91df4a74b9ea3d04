package bench

import (
	"strings"
	"testing"
	"time"
)

func TestSearchCellsLeft(t *testing.T) {
	tests := []struct {
		name string
		s    searchState
		n    int
		want int
	}{
		// 8 passes: doublings 16..256 (5) then up to 7 bisections of 128..256;
		// 8 fails: bisections of 4..8 (2). The bound is the larger.
		{"doubling", searchState{lo: 4, max: 256}, 8, 12},
		{"doubling to the top", searchState{lo: 128, max: 256}, 256, 0},
		{"bisecting 8..16 at 12", searchState{lo: 8, hi: 16, max: 256}, 12, 2},
		{"last bisection", searchState{lo: 8, hi: 10, max: 256}, 9, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.cellsLeft(tc.n); got != tc.want {
				t.Errorf("cellsLeft(%d) = %d, want %d", tc.n, got, tc.want)
			}
		})
	}
}

// Once the planned cells are done, the search's cells print their own
// bracket and ETA, not the plan's "eta 0s".
func TestProgressDuringSearch(t *testing.T) {
	var b strings.Builder
	p := &Progress{W: &b, Assumed: DefaultAssumed}
	plan := Plan{Output: 128}
	k := func(n int) Key { return Key{Mode: "closed", Context: 1024, Output: 128, Concurrency: n} }
	p.Start(plan, []Key{k(1)})
	p.Done(k(1), 4*time.Second)
	p.Search("chat", k(2), 1, 0, 16)
	p.Done(k(2), 5*time.Second)
	p.Search("chat", k(4), 2, 0, 16)
	p.Done(k(4), 6*time.Second)
	p.Search("chat", k(3), 2, 4, 16)
	p.Done(k(3), 5*time.Second)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"1/1 cells: closed ctx=1024 out=128 n=1 took 4s; eta 0s",
		"search chat: limit above 1: closed ctx=1024 out=128 n=2 took 5s; at most 6 more cells, eta ",
		"search chat: limit above 2: closed ctx=1024 out=128 n=4 took 6s; at most 5 more cells, eta ",
		"search chat: limit between 2 and 4: closed ctx=1024 out=128 n=3 took 5s; at most 0 more cells, eta 0s",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n %s\nwant a line starting\n %s", i, lines[i], w)
		}
		if i == 1 || i == 2 {
			if strings.HasSuffix(lines[i], "eta 0s") {
				t.Errorf("line %d: %s: cells are left, the ETA cannot be 0", i, lines[i])
			}
		}
	}
}
