package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/headroom-dev/headroom/internal/chromium"
)

func TestFrontier(t *testing.T) {
	pts := [][2]float64{{100, 50}, {200, 40}, {150, 30}, {300, 20}, {250, 25}}
	// Higher speed is better: (150, 30) has less throughput and speed than
	// (200, 40); (250, 25) less than (300, 20)? no: it is slower but faster per user.
	want := [][2]float64{{100, 50}, {200, 40}, {250, 25}, {300, 20}}
	if got := frontier(pts, true); !slices.Equal(got, want) {
		t.Errorf("frontier, higher better = %v, want %v", got, want)
	}
	// Lower TTFT is better: only points that beat every higher-throughput one.
	ttft := [][2]float64{{100, 1}, {200, 2}, {150, 3}, {300, 4}}
	if got, want := frontier(ttft, false), [][2]float64{{100, 1}, {200, 2}, {300, 4}}; !slices.Equal(got, want) {
		t.Errorf("frontier, lower better = %v, want %v", got, want)
	}
}

// roundTrip returns rep as report.json gives it back: saved and loaded, as a
// resumed sweep or a comparison reads it.
func roundTrip(t *testing.T, rep *Report) *Report {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.json")
	if err := rep.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// slower returns a copy of rep whose server is slower: TTFT up 30%, speed down 10%.
func slower(t *testing.T, rep *Report) *Report {
	t.Helper()
	b := roundTrip(t, rep)
	for i := range b.Cells {
		for j := range b.Cells[i].Requests {
			q := &b.Cells[i].Requests[j]
			q.TTFT *= 1.3
			q.Decode *= 0.9
		}
	}
	b.Derive()
	return b
}

// compare renders both runs side by side, with the Pareto charts drawn and
// the slower run's changes marked worse.
func TestCompareRenders(t *testing.T) {
	a, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	a.Derive()
	c := Comparison{A: a, B: slower(t, a), LabelA: "before", LabelB: "after"}
	path := filepath.Join(t.TempDir(), "compare.html")
	if err := WriteFile(path, c.WriteHTML); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<td class="worse">&#43;30.0%</td>`, `<td class="worse">-10.0%</td>`, "coding-assistant"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
	ctx := chromium.Context(t, 1100, 900)
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatal(err)
	}
	drawn := chartPixels(t, ctx)
	for _, id := range []string{"pareto-speed", "pareto-ttft"} {
		if drawn[id] < 150 {
			t.Errorf("chart %s: %d pixels of data drawn", id, drawn[id])
		}
	}
}

// A sweep of one context reads its single-request findings at that
// context, not as a change from a value to itself (issue 39), and its
// comparison lists that context's TTFT once.
func TestOneContextFindings(t *testing.T) {
	for _, tc := range []struct {
		f          Findings
		ttft, spd  string
		comparison int // TTFT rows of a comparison with itself
	}{
		{Findings{ShortCtx: 8192, LongCtx: 8192, TTFTShort: 0.2, TTFTLong: 0.2, DecodeShort: 50, DecodeLong: 50},
			"200 ms at 8192 context", "50.0 tok/s at 8192 context", 1},
		{Findings{ShortCtx: 1024, LongCtx: 32768, TTFTShort: 0.384, TTFTLong: 1.54, DecodeShort: 217.9, DecodeLong: 206.5},
			"384 ms (1024 context) → 1.54 s (32768 context)", "217.9 tok/s (1024 context) → 206.5 tok/s (32768 context)", 2},
	} {
		if got := tc.f.TTFTText(); got != tc.ttft {
			t.Errorf("TTFT %q, want %q", got, tc.ttft)
		}
		if got := tc.f.DecodeText(); got != tc.spd {
			t.Errorf("speed %q, want %q", got, tc.spd)
		}
	}
	rep, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	rep.Derive()
	one := *rep
	one.Plan.Contexts = one.Plan.Contexts[:1]
	var cells []Cell
	for _, c := range rep.Cells {
		if c.Context == one.Plan.Contexts[0] {
			cells = append(cells, c)
		}
	}
	one.Cells = cells
	one.Derive()
	ttftRows := 0
	for _, r := range (Comparison{A: &one, B: &one}).findings() {
		if strings.HasPrefix(r.Name, "TTFT") {
			ttftRows++
		}
	}
	if ttftRows != 1 {
		t.Errorf("%d TTFT rows for one context, want 1", ttftRows)
	}
	var md strings.Builder
	if err := one.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if want := "| TTFT single request | " + one.Findings().TTFTText() + " |"; !strings.Contains(md.String(), want) || strings.Contains(md.String(), "→") {
		t.Errorf("report.md of one context lacks %q or has an arrow", want)
	}
}
