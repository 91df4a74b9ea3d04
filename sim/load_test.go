package sim

import "testing"

// Rising holds its start, then compounds: 1% a minute doubles the users in
// about 70 minutes.
func TestRisingCompounds(t *testing.T) {
	r := Rising{Start: 10, Hold: 3600, Growth: 0.01}
	for _, tc := range []struct {
		t    float64
		want int
	}{{0, 10}, {3600, 10}, {3600 + 10*60, 11}, {3600 + 70*60, 20}, {3600 + 139*60, 40}} {
		if got := r.Users(tc.t); got != tc.want {
			t.Errorf("Users(%g) = %d, want %d", tc.t, got, tc.want)
		}
	}
}
