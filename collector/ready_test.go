package collector

import "testing"

// /-/ready: not ready while a target has not been read; ready once each
// has, up or down, saying which are down.
func TestReadiness(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ts    []TargetStatus
		ready bool
		text  string
	}{
		{"no targets yet", nil, true, "Ready: 0 targets, 0 of them up"},
		{"one not read", []TargetStatus{{Name: "a", Known: true, Up: true}, {Name: "b"}}, false, "Not ready: 1 of 2 targets not read yet: b"},
		{"the only target down", []TargetStatus{{Name: "a", Known: true, MetricsErr: "scrape: connection refused"}}, true, "Ready: 1 targets, 0 of them up; down: a"},
		{"up and down", []TargetStatus{{Name: "b", Known: true, MetricsErr: "HTTP 500"}, {Name: "a", Known: true, Up: true}}, true, "Ready: 2 targets, 1 of them up; down: b"},
	} {
		ready, text := Readiness(tc.ts)
		if ready != tc.ready || text != tc.text {
			t.Errorf("%s: %v %q, want %v %q", tc.name, ready, text, tc.ready, tc.text)
		}
	}
}
