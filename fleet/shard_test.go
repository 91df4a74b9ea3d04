package fleet

import (
	"fmt"
	"strings"
	"testing"
)

func names(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250))
	}
	return out
}

func TestShardsSplitEveryTargetOnce(t *testing.T) {
	for _, count := range []int{1, 2, 3, 8} {
		owners := map[int]int{}
		for _, n := range names(0, 1000) {
			mine := 0
			for i := range count {
				if (Shard{Index: i, Count: count}).Owns(n) {
					mine++
					owners[i]++
				}
			}
			if mine != 1 {
				t.Fatalf("count %d: %s owned by %d shards", count, n, mine)
			}
		}
		for i := range count {
			// Binomial(1000, 1/count): 5 standard deviations either way.
			want := 1000.0 / float64(count)
			if d := float64(owners[i]) - want; d*d > 25*want*(1-1/float64(count)) {
				t.Errorf("count %d: shard %d owns %d of 1000, want about %.0f", count, i, owners[i], want)
			}
		}
	}
}

func TestShardOwnershipStable(t *testing.T) {
	before := map[string]int{}
	for _, n := range names(0, 100) {
		before[n] = Owner(n, 2)
	}
	// Targets join: none of the others moves.
	for _, n := range names(0, 110) {
		if o, ok := before[n]; ok && Owner(n, 2) != o {
			t.Errorf("%s moved from shard %d when 10 targets joined", n, o)
		}
	}
	// A third replica: targets move only to it.
	moved := 0
	for n, o := range before {
		if now := Owner(n, 3); now != o {
			moved++
			if now != 2 {
				t.Errorf("%s moved from shard %d to %d, not to the new replica", n, o, now)
			}
		}
	}
	if moved == 0 || moved > 60 {
		t.Errorf("%d of 100 targets moved to a third replica, want about a third", moved)
	}
}

func TestParseShard(t *testing.T) {
	tests := []struct {
		index string
		count int
		host  string
		want  Shard
		err   string
	}{
		{"0", 1, "", Shard{0, 1}, ""},
		{"2", 3, "", Shard{2, 3}, ""},
		{"ordinal", 3, "headroom-2", Shard{2, 3}, ""},
		{"ordinal", 12, "headroom-shard-11", Shard{11, 12}, ""},
		{"ordinal", 2, "headroom-2", Shard{}, "shard index must be in [0, 2), got 2"},
		{"ordinal", 2, "laptop", Shard{}, `shard index from the host name: "laptop" does not end in -<ordinal>`},
		{"ordinal", 2, "headroom-7f9c", Shard{}, `shard index must be a number or "ordinal", got "7f9c"`},
		{"3", 3, "", Shard{}, "shard index must be in [0, 3), got 3"},
		{"-1", 3, "", Shard{}, "shard index must be in [0, 3), got -1"},
		{"two", 3, "", Shard{}, `shard index must be a number or "ordinal", got "two"`},
		{"0", 0, "", Shard{}, "shard count must be at least 1, got 0"},
	}
	for _, tc := range tests {
		got, err := ParseShard(tc.index, tc.count, func() (string, error) { return tc.host, nil })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseShard(%q, %d) on %q: error %v, want %q", tc.index, tc.count, tc.host, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseShard(%q, %d) on %q = %v, %v; want %v", tc.index, tc.count, tc.host, got, err, tc.want)
		}
	}
}
