package engine

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkParseFleetPage reads one engine page of `headroom sim serve
// --fleet` (a few minutes into TIME_SCALE=20 scripts/fleet-scale.sh): a
// replica reads one such page per target every engine_scrape_interval,
// 200 a second at 1,000 targets (go test ./engine -run '^$' -bench
// FleetPage -benchmem).
func BenchmarkParseFleetPage(b *testing.B) {
	page, err := os.ReadFile("testdata/sim-fleet.prom")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(page), "auto"); err != nil {
			b.Fatal(err)
		}
	}
}
