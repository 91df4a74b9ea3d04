package monitor

import (
	"math"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/engine"
)

func TestDecodeSpan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func(running, count, sum float64) engine.Load {
		return engine.Load{Engine: "vllm", Running: running, ITLCount: count, ITLSum: sum}
	}
	nan := math.NaN()
	type reading struct {
		after time.Duration // since the first reading
		l     engine.Load
	}
	for _, tc := range []struct {
		name     string
		readings []reading
		want     []Decode // the spans completed, in order
	}{
		{"a span's readings average the batch; its tokens give the ITL",
			[]reading{{0, read(4, 100, 1)}, {5 * time.Second, read(6, 150, 2)}, {DecodeSpan, read(8, 300, 4)}},
			[]Decode{{Time: t0, Running: 6, ITL: 3.0 / 200}}},
		{"nothing until a span is complete",
			[]reading{{0, read(4, 100, 1)}, {DecodeSpan - time.Second, read(4, 200, 2)}},
			nil},
		{"spans follow one another",
			[]reading{{0, read(2, 0, 0)}, {DecodeSpan, read(2, 100, 1)}, {2 * DecodeSpan, read(4, 300, 5)}},
			[]Decode{{Time: t0, Running: 2, ITL: 0.01}, {Time: t0.Add(DecodeSpan), Running: 3, ITL: 0.02}}},
		{"no tokens served: no decode",
			[]reading{{0, read(0, 100, 1)}, {DecodeSpan, read(0, 100, 1)}},
			nil},
		{"an engine without the histogram",
			[]reading{{0, read(4, nan, nan)}, {DecodeSpan, read(4, nan, nan)}},
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s decodeSpan
			var got []Decode
			for _, r := range tc.readings {
				if d, ok := s.add(r.l, t0.Add(r.after)); ok {
					got = append(got, d)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if !g.Time.Equal(w.Time) || math.Abs(g.Running-w.Running) > 1e-9 || math.Abs(g.ITL-w.ITL) > 1e-12 {
					t.Errorf("span %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// The queue the capacity model reads is production's waiting prompts over
// time: one caught at a reading fades within a few DecodeSpans, a queue
// that stands stays, and an unknown reading forgets the mean.
func TestQueueMean(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	every := 5 * time.Second
	for _, c := range []struct {
		name     string
		readings []float64
		lo, hi   float64
	}{
		{"first reading", []float64{2}, 2, 2},
		{"one caught waiting, then none for a minute", append([]float64{1}, make([]float64, 12)...), 0.1, 0.15},
		{"a queue of three that stands", []float64{3, 3, 3, 3, 3, 3}, 3, 3},
		{"one in five readings", []float64{0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, 0.1, 0.35},
		{"unknown", []float64{2, 2, math.NaN()}, math.NaN(), math.NaN()},
	} {
		t.Run(c.name, func(t *testing.T) {
			var q queueMean
			got := 0.0
			for i, w := range c.readings {
				got = q.add(w, t0.Add(time.Duration(i)*every))
			}
			if math.IsNaN(c.lo) != math.IsNaN(got) || got < c.lo || got > c.hi {
				t.Errorf("mean %.3f, want [%v, %v]", got, c.lo, c.hi)
			}
		})
	}
}
