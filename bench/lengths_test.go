package bench

import (
	"math"
	"testing"
	"testing/synctest"
)

func meanCV(vs []float64) (mean, cv float64) {
	for _, v := range vs {
		mean += v
	}
	mean /= float64(len(vs))
	ss := 0.0
	for _, v := range vs {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss/float64(len(vs)-1)) / mean
}

func TestLengthsDraw(t *testing.T) {
	k := Key{Mode: "closed", Context: 8192, Output: 1024, Concurrency: 4}
	p := Plan{InputSpread: 0.3, OutputSpread: 0.5, Seed: 3}
	if newLengths(Plan{}, k) != nil {
		t.Fatal("no spread, yet lengths are drawn")
	}
	a, b := newLengths(p, k), newLengths(p, k)
	var in, out []float64
	for range 20000 {
		i, o := a.draw()
		i2, o2 := b.draw()
		if i != i2 || o != o2 {
			t.Fatal("the same seed and cell drew other lengths")
		}
		if i < 8192/4 || i > 2*8192 || o < 1024/4 || o > 2*1024 {
			t.Fatalf("drew %d and %d: outside a quarter to twice the cell's", i, o)
		}
		in, out = append(in, float64(i)), append(out, float64(o))
	}
	// The clamp trims the tails: the mean stays within 3%, the spread a little under.
	for _, tc := range []struct {
		name     string
		vs       []float64
		mean, cv float64
	}{{"prompt", in, 8192, 0.3}, {"output", out, 1024, 0.5}} {
		m, cv := meanCV(tc.vs)
		if math.Abs(m-tc.mean)/tc.mean > 0.03 || cv > tc.cv*1.02 || cv < tc.cv*0.8 {
			t.Errorf("%s lengths: mean %.0f, spread %.3f; want %.0f and about %.2f", tc.name, m, cv, tc.mean, tc.cv)
		}
	}
}

// Requests of drawn lengths are sized with the server's tokenizer as probes
// are: each is counted at its own length, none is a prompt mismatch.
func TestSweepWithLengthSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg := serveSim(t, "tiny", 1, nil)
		rep := newReport(Plan{Contexts: []int{2048}, Concurrency: []int{4}, Output: 32, RequestsPerCell: 60, InputSpread: 0.3, OutputSpread: 0.3, Seed: 5})
		if err := newRunner(tg).Run(t.Context(), rep); err != nil {
			t.Fatal(err)
		}
		c := rep.Cells[0]
		if c.SuccessRate != 1 || len(c.Requests) != 60 {
			t.Fatalf("%d requests, success %.2f, failures %v %v", len(c.Requests), c.SuccessRate, c.Failures, c.Errors)
		}
		draw := newLengths(rep.Plan, c.Key)
		want := map[int]int{} // drawn prompt lengths, as a multiset: requests finish out of order
		for range 60 {
			in, _ := draw.draw()
			want[in]++
		}
		var in, out []float64
		for _, q := range c.Requests {
			in, out = append(in, float64(q.PromptTokens)), append(out, float64(q.OutputTokens))
		}
		if _, cv := meanCV(in); cv < 0.15 {
			t.Errorf("prompt tokens spread %.3f, want the drawn 0.3 or near", cv)
		}
		if _, cv := meanCV(out); cv < 0.15 {
			t.Errorf("output tokens spread %.3f, want the drawn 0.3 or near", cv)
		}
		near := 0
		for _, q := range c.Requests {
			for l := range want {
				if math.Abs(float64(q.PromptTokens-l)) <= 0.02*float64(l)+8 {
					near++
					break
				}
			}
		}
		if near != 60 {
			t.Errorf("%d of 60 requests were counted near a drawn length", near)
		}
	})
}
