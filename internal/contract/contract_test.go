package contract

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// README's metric table documents exactly the contract, each metric with
// its type.
func TestREADMEDocumentsTheContract(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| (headroom_[a-z0-9_]+) \| ([a-z]+)[^|]* \|`).FindAllStringSubmatch(string(b), -1)
	documented := map[string]string{}
	for _, r := range rows {
		documented[r[1]] = r[2]
	}
	for _, m := range Metrics {
		typ, ok := documented[m.Name]
		switch {
		case !ok:
			t.Errorf("%s is not in README's metric table", m.Name)
		case typ != m.Type:
			t.Errorf("%s: README says %s, the contract %s", m.Name, typ, m.Type)
		}
		delete(documented, m.Name)
	}
	for name := range documented {
		t.Errorf("README's metric table has %s, which the contract does not", name)
	}
}

func TestMetricsAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Metrics {
		if seen[m.Name] {
			t.Errorf("%s twice", m.Name)
		}
		seen[m.Name] = true
		if !slices.IsSorted(m.Labels) {
			t.Errorf("%s: labels %v not sorted", m.Name, m.Labels)
		}
		// Prometheus's naming guide: counters end in _total, and only they.
		if (m.Type == "counter") != strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s is a %s", m.Name, m.Type)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		series string
		want   string
	}{
		{"headroom_probe_ttft_seconds_bucket", "headroom_probe_ttft_seconds"},
		{"headroom_probe_ttft_seconds_count", "headroom_probe_ttft_seconds"},
		{"headroom_probes_total", "headroom_probes_total"},
		{"headroom_capacity_requests_sum", ""}, // a gauge has no _sum
		{"headroom_nope", ""},
	} {
		m, ok := Lookup(tc.series)
		if ok != (tc.want != "") || m.Name != tc.want {
			t.Errorf("Lookup(%s) = %q, %v; want %q", tc.series, m.Name, ok, tc.want)
		}
	}
}
