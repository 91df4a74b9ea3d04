package bench

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/chromium"
	"github.com/headroom-dev/headroom/power"
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

// chartPixels screenshots every chart of the open page and counts its pixels
// in a series colour, by chart id.
func chartPixels(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	var nodes []*cdp.Node
	if err := chromedp.Run(ctx, chromedp.Nodes("figure.chart", &nodes, chromedp.ByQueryAll)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range nodes {
		id := n.AttributeValue("data-chart")
		var shot []byte
		if err := chromedp.Run(ctx, chromedp.ScreenshotNodes([]*cdp.Node{n}, 1, &shot)); err != nil {
			t.Fatalf("screenshot %s: %v", id, err)
		}
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		out[id] = dataPixels(img)
	}
	return out
}

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
	ctx := chromium.Context(t, 1000, 800)
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+filepath.Join(dir, "report.html"))); err != nil {
		t.Fatal(err)
	}
	drawn := chartPixels(t, ctx)
	if len(drawn) != len(want) {
		t.Errorf("%d charts on the page, want %d", len(drawn), len(want))
	}
	for id, px := range drawn {
		delete(want, id)
		// A line with a few points is hundreds of pixels; a legend swatch alone is ~60.
		if px < 150 {
			t.Errorf("chart %s: %d pixels of data drawn, want a line", id, px)
		}
	}
	for id := range want {
		t.Errorf("chart %s is not on the page", id)
	}
	for _, o := range overlappingText(t, ctx) {
		t.Errorf("overlapping labels: %s", o)
	}
}

// overlapsJS lists the pairs of texts of a chart whose boxes, as drawn
// (rotation included), overlap.
const overlapsJS = `[...document.querySelectorAll("figure.chart svg")].flatMap(svg => {
	const ts = [...svg.querySelectorAll("text")].map(t => ({t: t.textContent, b: t.getBoundingClientRect()}));
	const out = [];
	for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {
		const a = ts[i].b, c = ts[j].b;
		if (a.x < c.x + c.width - 0.5 && c.x < a.x + a.width - 0.5 && a.y < c.y + c.height - 0.5 && c.y < a.y + a.height - 0.5)
			out.push(svg.closest("figure").dataset.chart + ": " + ts[i].t + " / " + ts[j].t);
	}
	return out;
})`

// overlappingText is no text of a chart on the page over another: a
// limit's or threshold's label neither on a tick nor on another label
// (issue 39: "limit 248.6" sat on the tick "200").
func overlappingText(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var out []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(overlapsJS, &out)); err != nil {
		t.Fatal(err)
	}
	return out
}

// Rule labels where they would collide: a limit at the right edge under
// the second axis's top tick, two limits side by side, thresholds close
// together and one on each axis.
func TestRuleLabelsClearOfTicks(t *testing.T) {
	charts := []Chart{
		{ID: "edge", XLabel: "concurrency", YLabel: "tok/s", YLabel2: "s",
			Series: []Series{{Name: "throughput", Points: [][2]float64{{1, 100}, {128, 900}, {256, 1000}}}, {Name: "TTFT", Right: true, Points: [][2]float64{{1, 0.2}, {256, 200}}}},
			VRules: []Rule{{At: 248.6, Label: "limit 248.6"}, {At: 240, Label: "limit 240.0"}}},
		{ID: "thresholds", XLabel: "concurrency", YLabel: "s", YLabel2: "tok/s",
			Series: []Series{{Name: "TTFT", Points: [][2]float64{{1, 1}, {8, 9}}}, {Name: "speed", Right: true, Points: [][2]float64{{1, 80}, {8, 20}}}},
			HRules: []Rule{{At: 8, Label: "TTFT max 8 s"}, {At: 8.2, Label: "TTFT p90 max 8.2 s"}, {At: 15, Label: "speed min 15", Right: true}},
			VRules: []Rule{{At: 7.9, Label: "limit 7.9"}}},
	}
	var page strings.Builder
	page.WriteString("<!doctype html><html><body>")
	for _, c := range charts {
		fmt.Fprintf(&page, `<figure class="chart" data-chart="%s">%s</figure>`, c.ID, c.SVG())
	}
	page.WriteString("</body></html>")
	path := filepath.Join(t.TempDir(), "charts.html")
	if err := os.WriteFile(path, []byte(page.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := chromium.Context(t, 1000, 900)
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatal(err)
	}
	for _, o := range overlappingText(t, ctx) {
		t.Errorf("overlapping labels: %s", o)
	}
}

// reference000 maps each part of reference report 000 to the section of a
// bench report that answers it, and what that section must hold.
var reference000 = []struct {
	part, id      string
	charts, cells int // at least this many charts drawn and numeric table cells
}{
	{"Model / test hardware card", "card", 0, 0},
	{"Highlights", "highlights", 0, 0},
	{"Key findings", "findings", 0, 5},
	{"Use case guidance", "guidance", 0, 5},
	{"System throughput", "throughput", 1, 0},
	{"Per-user generation speed", "decode", 1, 0},
	{"Time to first token", "ttft", 1, 0},
	{"Capacity analysis: code completion", "capacity-code-completion", 1, 6},
	{"Capacity analysis: short-form chatbot", "capacity-short-chatbot", 1, 6},
	{"Capacity analysis: general chatbot", "capacity-chatbot", 1, 6},
	{"Capacity analysis: long document processing", "capacity-document", 1, 6},
	{"Capacity analysis: automated coding assistant", "capacity-coding-assistant", 1, 6},
	{"Queue wait times", "queue", 1, 0},
	{"Per-user prefill speed", "prefill", 1, 0},
	{"Inter-token latency", "itl", 1, 0},
	{"Scaling efficiency", "efficiency", 1, 0},
	{"Power consumption", "power", 1, 0},
	{"Percentile breakdowns (on request in 000)", "cells", 0, 100},
	{"Methodology", "methodology", 0, 1},
	{"Glossary (000's 'how fast/responsive is this')", "glossary", 0, 0},
}

// sectionJS measures a section of the page: the charts and numeric table
// cells between its heading and the next heading of its level or above, its
// text, and whether it is listed in the contents.
const sectionJS = `(function(id) {
  const h = document.getElementById(id);
  if (!h) return null;
  const level = /^H[1-6]$/.test(h.tagName) ? +h.tagName[1] : 9;
  const nodes = /^H[1-6]$/.test(h.tagName) ? [] : [h];
  for (let n = h.nextElementSibling; n && !(/^H[1-6]$/.test(n.tagName) && +n.tagName[1] <= level); n = n.nextElementSibling) nodes.push(n);
  let charts = 0, cells = 0, text = "";
  for (const n of nodes) {
    charts += n.matches("figure.chart") ? 1 : n.querySelectorAll("figure.chart").length;
    for (const td of n.querySelectorAll("td")) if (/\d/.test(td.textContent)) cells++;
    text += n.textContent;
  }
  return {charts, cells, text, listed: !!document.querySelector('nav a[href="#' + id + '"]')};
})`

// A report of headroom bench against headroom sim on report 000's profile has
// a counterpart of every part of report 000, with data drawn in each chart
// and no legend clipped. Under -race its sweep took 102 s of the race
// step, which the other sweeps' tests cover: .ci/run runs it without.
func TestReportHasReference000Sections(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a sweep of the simulator: not under -short or -race")
	}
	ctx := chromium.Context(t, 1100, 900)
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The sweep in virtual time (see serve); the page in Chromium outside it.
	synctest.Test(t, func(t *testing.T) {
		tg := serveSim(t, "qwen3-coder-next-fp8-h200-sglang", 50, nil)
		r := newRunner(tg)
		r.Power = power.DCGM{URL: tg.url + "/metrics", Client: tg.client()}
		rep := newReport(Plan{Contexts: []int{1024, 8192, 32768}, Concurrency: []int{1, 2, 4, 8}, Output: 256, Warmup: 1,
			Burst: []int{1, 4, 16, 64}, BurstTTFTMax: 3, UseCases: UseCases(cfg, 256)})
		rep.Target = Target{URL: tg.url, API: "chat", Engine: "auto"}
		rep.Power, rep.EnergyPrice = "dcgm", 0.10
		if err := r.Run(t.Context(), rep); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteAll(dir); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() {
		return
	}
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+filepath.Join(dir, "report.html"))); err != nil {
		t.Fatal(err)
	}
	for _, p := range reference000 {
		var got *struct {
			Charts, Cells int
			Text          string
			Listed        bool
		}
		if err := chromedp.Run(ctx, chromedp.Evaluate(sectionJS+"("+strconv.Quote(p.id)+")", &got)); err != nil {
			t.Fatal(err)
		}
		switch {
		case got == nil:
			t.Errorf("%s: no section #%s", p.part, p.id)
		case got.Charts < p.charts || got.Cells < p.cells:
			t.Errorf("%s (#%s): %d charts and %d numeric cells, want at least %d and %d", p.part, p.id, got.Charts, got.Cells, p.charts, p.cells)
		case !got.Listed && p.id != "card" && p.id != "highlights":
			t.Errorf("%s (#%s) is not in the contents", p.part, p.id)
		}
		if got != nil {
			t.Logf("%-50s #%-26s %d charts, %3d cells", p.part, p.id, got.Charts, got.Cells)
		}
	}
	for id, px := range chartPixels(t, ctx) {
		if px < 150 {
			t.Errorf("chart %s: %d pixels of data drawn, want a line", id, px)
		}
	}
	var card, cards string
	if err := chromedp.Run(ctx, chromedp.Text("#card", &card), chromedp.Text("#highlights", &cards)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"H200 SXM", "141 GiB", "W per GPU", "vllm"} {
		if !strings.Contains(card, want) {
			t.Errorf("hardware and model card lacks %q:\n%s", want, card)
		}
	}
	for _, want := range []string{"Peak system throughput", "Success rate", "Concurrent requests", "Output tokens per hour", "GPU energy per hour", "per kWh"} {
		if !strings.Contains(cards, want) {
			t.Errorf("highlights lack %q:\n%s", want, cards)
		}
	}
	// Every legend's text ends inside its chart.
	var clipped []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll("svg text.legend")].filter(t => {
		const b = t.getBBox(); return b.x + b.width > t.ownerSVGElement.viewBox.baseVal.width }).map(t => t.textContent)`, &clipped)); err != nil {
		t.Fatal(err)
	}
	if len(clipped) > 0 {
		t.Errorf("legends clipped: %v", clipped)
	}
	// Bursts of 1 to 64 span more than 10x: their axis is logarithmic.
	var logAxes int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll("figure.chart[data-chart^=burst-] svg")].filter(s => s.textContent.includes("(log scale)")).length`, &logAxes)); err != nil {
		t.Fatal(err)
	}
	if logAxes != 3 {
		t.Errorf("%d burst charts on a log axis, want 3", logAxes)
	}
}
