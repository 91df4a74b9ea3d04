package e2e

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/headroom-dev/headroom/internal/chromium"
)

// checkStatusPage opens a running daemon's /status in headless Chromium,
// screenshots it, and holds it to /api/v1/status: every target and use
// case shown, with the same capacity to the shown precision, and every
// curve of a use case with samples drawn with points.
func checkStatusPage(t *testing.T, addr, shotPath string) {
	t.Helper()
	if !chromium.Available() {
		t.Log("no chromium on PATH: the status page is not checked")
		return
	}
	ctx := chromium.Context(t, 1400, 1000, time.Minute)
	type row struct {
		Target, UseCase, Capacity string
		Dots                      []int
	}
	// The page is rendered between two reads of /api/v1/status. The demo's
	// estimates move every few seconds (its simulator runs at 10x), so the
	// comparison takes a render whose reads on both sides agree, trying a
	// few times; otherwise the page must show one of the two.
	var before, after map[string]estimate
	var rows []row
	var shot []byte
	for range 5 {
		before = statusJSON(t, addr)
		err := chromedp.Run(ctx, chromedp.Navigate("http://"+addr+"/status"),
			chromedp.Evaluate(`Array.from(document.querySelectorAll('tr[data-target]')).map(r => ({
			Target: r.dataset.target, UseCase: r.dataset.useCase,
			Capacity: r.querySelector('td.capacity').textContent,
			Dots: Array.from(r.querySelectorAll('svg[data-curve]')).map(s => s.querySelectorAll('circle').length)}))`, &rows),
			chromedp.FullScreenshot(&shot, 100)) // 100: PNG
		if err != nil {
			t.Fatal(err)
		}
		after = statusJSON(t, addr)
		if sameShown(before, after) {
			break
		}
	}
	if err := os.WriteFile(shotPath, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if img, err := png.Decode(bytes.NewReader(shot)); err != nil || img.Bounds().Dx() < 1000 {
		t.Errorf("screenshot: %v", err)
	}
	shown := map[string]row{}
	for _, r := range rows {
		shown[r.Target+"/"+r.UseCase] = r
	}
	for key, e := range after {
		r, ok := shown[key]
		if !ok {
			t.Errorf("%s is not on the status page", key)
			continue
		}
		if r.Capacity != e.shown() && r.Capacity != before[key].shown() {
			t.Errorf("%s: the page shows capacity %s, /api/v1/status %s then %s", key, r.Capacity, before[key].shown(), e.shown())
		}
		if len(r.Dots) == 0 {
			t.Errorf("%s: no curve on the page", key)
		}
		for i, n := range r.Dots {
			if e.Samples > 0 && n == 0 {
				t.Errorf("%s: curve %d has no points drawn, %d samples", key, i, e.Samples)
			}
		}
	}
	t.Logf("status page: %d rows, screenshot %s", len(rows), filepath.Base(shotPath))
}

type estimate struct {
	Capacity *float64 `json:"capacity"`
	Lower    *float64 `json:"capacity_lower"`
	Bound    string   `json:"bound"`
	Samples  int      `json:"samples"`
}

// shown is the capacity as the page writes it: a lower bound as "≥ x".
func (e estimate) shown() string {
	if e.Bound == "lower" && e.Lower != nil {
		return fmt.Sprintf("≥ %.1f", *e.Lower)
	}
	if e.Capacity == nil || math.IsInf(*e.Capacity, 0) {
		return "-"
	}
	return fmt.Sprintf("%.1f", *e.Capacity)
}

// statusJSON reads /api/v1/status, keyed target/use case.
func statusJSON(t *testing.T, addr string) map[string]estimate {
	var st struct {
		Estimates []struct {
			Target  string `json:"target"`
			UseCase string `json:"use_case"`
			estimate
		} `json:"estimates"`
	}
	get(t, "http://"+addr+"/api/v1/status", &st)
	out := map[string]estimate{}
	for _, e := range st.Estimates {
		out[e.Target+"/"+e.UseCase] = e.estimate
	}
	return out
}

// sameShown says two reads of the status show the same capacities.
func sameShown(a, b map[string]estimate) bool {
	if len(a) != len(b) {
		return false
	}
	for k, e := range a {
		if b[k].shown() != e.shown() {
			return false
		}
	}
	return true
}
