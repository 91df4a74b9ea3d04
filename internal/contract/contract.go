// Package contract reads the metric names of DESIGN.md's metrics table, the
// contract that dashboards and alerts are checked against.
package contract

import (
	"fmt"
	"os"
	"regexp"
)

var row = regexp.MustCompile(`(?m)^\| (headroom_[a-z0-9_]+) \|`)

var suffix = regexp.MustCompile(`_(bucket|count|sum)$`)

// Names returns the metric names of the design document at path.
func Names(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	if len(names) < 20 {
		return nil, fmt.Errorf("%s: only %d metric names in its table", path, len(names))
	}
	return names, nil
}

// Has reports whether a series name belongs to a contract metric, reading a
// histogram's _bucket, _count and _sum series as the histogram.
func Has(names map[string]bool, series string) bool {
	return names[series] || names[suffix.ReplaceAllString(series, "")]
}
