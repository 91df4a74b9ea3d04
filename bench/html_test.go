package bench

import (
	"bytes"
	"image"
	"image/png"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/headroom-dev/headroom/internal/chromium"
)

// dataPixels counts the pixels of a screenshot drawn in a series colour.
func dataPixels(img image.Image) int {
	var want [][3]int
	for _, hex := range Palette {
		v, _ := strconv.ParseUint(hex[1:], 16, 32)
		want = append(want, [3]int{int(v >> 16), int(v >> 8 & 0xff), int(v & 0xff)})
	}
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			for _, c := range want {
				if abs(int(r>>8)-c[0]) < 24 && abs(int(g>>8)-c[1]) < 24 && abs(int(bl>>8)-c[2]) < 24 {
					n++
					break
				}
			}
		}
	}
	return n
}

func abs(v int) int { return max(v, -v) }

// The HTML report, opened in headless Chromium, draws data in every chart.
func TestHTMLChartsDrawInChromium(t *testing.T) {
	rep, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	rep.Derive()
	want := map[string]bool{}
	for _, s := range rep.Sections() {
		for _, c := range s.Charts {
			want[c.ID] = true
		}
	}
	dir := t.TempDir()
	if err := rep.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	ctx := chromium.Context(t, 1000, 800, 2*time.Minute)
	var nodes []*cdp.Node
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+filepath.Join(dir, "report.html")),
		chromedp.Nodes("figure.chart", &nodes, chromedp.ByQueryAll)); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != len(want) {
		t.Errorf("%d charts on the page, want %d", len(nodes), len(want))
	}
	for _, n := range nodes {
		id := n.AttributeValue("data-chart")
		delete(want, id)
		var shot []byte
		if err := chromedp.Run(ctx, chromedp.ScreenshotNodes([]*cdp.Node{n}, 1, &shot)); err != nil {
			t.Fatalf("screenshot %s: %v", id, err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		// A line with a few points is hundreds of pixels; a legend swatch alone is ~60.
		if px := dataPixels(img); px < 150 {
			t.Errorf("chart %s: %d pixels of data drawn, want a line", id, px)
		}
	}
	for id := range want {
		t.Errorf("chart %s is not on the page", id)
	}
}
