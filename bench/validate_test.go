package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// patched is testdata/report.json with edit applied to its JSON.
func patched(t testing.TB, edit func(r map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	edit(r)
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cell(r map[string]any, i int) map[string]any { return r["cells"].([]any)[i].(map[string]any) }

func request(r map[string]any, i, j int) map[string]any {
	return cell(r, i)["requests"].([]any)[j].(map[string]any)
}

// Numbers no server measured are refused when a report is read (to
// compare, resume or seed the daemon), each error naming the field.
func TestLoadRefusesAbsurdNumbers(t *testing.T) {
	tests := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		// Issue 37, case 1: its throughput was +Inf, and its axis never ended.
		{"1e18 tokens in 5e-324 s", func(r map[string]any) {
			cell(r, 0)["duration_s"] = 5e-324
			request(r, 0, 0)["output_tokens"] = 1e18
		}, "cells[0].requests[0].output_tokens: 1e+18 is out of range [0, 1.6777216e+07]"},
		{"a duration shorter than its requests", func(r map[string]any) { cell(r, 0)["duration_s"] = 5e-324 },
			"cells[0].duration_s: 5e-324 s"},
		// Case 15: seeds at these concurrencies gave a capacity of 9.22e18.
		{"concurrency -5", func(r map[string]any) { cell(r, 1)["concurrency"] = -5 }, "cells[1].concurrency: -5 is out of range [1, 65536]"},
		{"concurrency 0", func(r map[string]any) { cell(r, 1)["concurrency"] = 0 }, "cells[1].concurrency: 0 is out of range"},
		{"concurrency 2^62", func(r map[string]any) { cell(r, 1)["concurrency"] = 1 << 62 }, "cells[1].concurrency: 4.611686018427388e+18 is out of range"},
		{"context -1", func(r map[string]any) { cell(r, 2)["context"] = -1 }, "cells[2].context: -1 is out of range [1, 1.6777216e+07]"},
		{"an unknown mode", func(r map[string]any) { cell(r, 0)["mode"] = "open" }, `cells[0].mode: "open"; want closed, burst or rate`},
		{"a negative TTFT", func(r map[string]any) { request(r, 0, 1)["ttft_s"] = -1 }, "cells[0].requests[1].ttft_s: -1 is out of range"},
		{"a huge decode speed", func(r map[string]any) { request(r, 0, 1)["decode_tps"] = 1e300 }, "cells[0].requests[1].decode_tps: 1e+300 is out of range"},
		{"time scale 0", func(r map[string]any) { r["time_scale"] = 0 }, "time_scale: 0 is out of range (0, 1e+06]"},
		{"a plan's context", func(r map[string]any) { r["plan"].(map[string]any)["contexts"] = []any{1024, -1} }, "plan.contexts[1]: -1 is not a count from 1 to"},
		{"a use case's threshold", func(r map[string]any) {
			r["plan"].(map[string]any)["use_cases"].([]any)[0].(map[string]any)["ttft_max_s"] = 1e300
		}, "plan.use_cases[0].ttft_max_s: 1e+300 is not a number of seconds"},
		{"a repeat of 10^9", func(r map[string]any) { r["plan"].(map[string]any)["repeat"] = 1e9 }, "plan.repeat: 1000000000 is not a count from 0 to 1000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "report.json")
			if err := os.WriteFile(path, patched(t, tc.edit), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v\nwant an error naming %q", err, tc.want)
			}
		})
	}
}

// An axis is bounded whatever a chart is given: points that are no number,
// denormals and the largest floats draw in a few ticks, quickly.
func TestChartAxesBounded(t *testing.T) {
	tiny, huge := math.SmallestNonzeroFloat64, math.MaxFloat64
	for _, pts := range [][][2]float64{
		{{1, 1}, {2, math.Inf(1)}, {4, math.NaN()}},
		{{tiny, 1}, {math.Inf(1), 2}, {huge, 3}},
		{{1, tiny}, {2, tiny}},
		{{1, huge}, {2, huge / 2}},
		{{tiny, tiny}, {huge, huge}},
		{{0, 0}},
		{},
	} {
		began := time.Now()
		svg := string(Chart{Title: "t", Series: []Series{{Name: "s", Points: pts, Err: []float64{math.Inf(1)}}},
			HRules: []Rule{{At: math.NaN()}, {At: huge}}, VRules: []Rule{{At: math.Inf(-1)}}}.SVG())
		if d := time.Since(began); d > time.Second || len(svg) > 64<<10 {
			t.Errorf("%v: %d bytes in %s", pts, len(svg), d)
		}
		if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
			t.Errorf("%v: the chart carries NaN or Inf", pts)
		}
		if n := strings.Count(svg, `text-anchor="middle" font-size="11"`); n > maxTicks+1 {
			t.Errorf("%v: %d x ticks", pts, n)
		}
	}
}

// FuzzLoadReport reads any report.json and draws everything from it: what
// Load accepts renders every output, each chart bounded, in bounded time.
// Seeds: the recorded sweep, and the absurd numbers of issue 37.
func FuzzLoadReport(f *testing.F) {
	f.Add(patched(f, func(map[string]any) {}))
	f.Add(patched(f, func(r map[string]any) {
		cell(r, 0)["duration_s"] = 5e-324
		request(r, 0, 0)["output_tokens"] = 1e18
	}))
	f.Add(patched(f, func(r map[string]any) { cell(r, 1)["concurrency"] = 1 << 62 }))
	f.Add(patched(f, func(r map[string]any) { cell(r, 0)["duration_s"] = 1e-300 }))
	f.Add([]byte(`{"schema":1,"time_scale":1,"plan":{"contexts":[1],"concurrency":[1],"output_tokens":2},` +
		`"cells":[{"mode":"closed","context":1,"output":1,"concurrency":1,"duration_s":1e-9,"requests":[{"e2e_s":1e-9,"output_tokens":16777216}]}]}`))
	f.Add([]byte(`{"schema":1,"time_scale":1e6,"plan":{"contexts":[1],"rates":[1e6],"output_tokens":2,"arrival":"constant"},` +
		`"cells":[{"mode":"rate","context":1,"output":1,"rate_rps":1e-300,"duration_s":0,"requests":[]}]}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "report.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Load(path)
		if err != nil {
			return
		}
		began := time.Now()
		var out bytes.Buffer
		for _, write := range []func(*bytes.Buffer) error{
			func(w *bytes.Buffer) error { return r.WriteMarkdown(w) },
			func(w *bytes.Buffer) error { return r.WriteCSV(w) },
			func(w *bytes.Buffer) error { return r.WriteHTML(w) },
			func(w *bytes.Buffer) error { return Comparison{A: r, B: r, LabelA: "a", LabelB: "b"}.WriteHTML(w) },
		} {
			out.Reset()
			if err := write(&out); err != nil {
				t.Fatalf("a report Load accepted does not render: %v", err)
			}
			if bytes.Contains(out.Bytes(), []byte("NaN,")) || bytes.Contains(out.Bytes(), []byte("Inf,")) {
				t.Fatalf("a chart carries a coordinate that is no number")
			}
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Fatalf("rendering took %s", d)
		}
	})
}

// A server's text in report.md is inert once rendered to HTML: a model id
// that is a script tag, or that carries a table's bar or a link, stays
// text within its cell (issue 37, case 6).
func TestMarkdownEscapesServerText(t *testing.T) {
	r, err := Load("testdata/report.json")
	if err != nil {
		t.Fatal(err)
	}
	r.Target.Model = "<script>alert(1)</script> | [x](javascript:alert(2)) \\| &lt;img&gt;\nnext"
	r.Plan.UseCases[0].Name = "a|b<i>"
	r.Derive()
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, bad := range []string{"<script", "<i>", "[x](", "&lt;img", "\nnext"} {
		if strings.Contains(md, bad) {
			t.Errorf("report.md carries %q", bad)
		}
	}
	rows := 0
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| a\\|b") {
			rows++
			// The use case table's row: seven cells, whatever its name holds.
			if n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"); n != 7 {
				t.Errorf("a row with an escaped bar has %d bars, want 7: %s", n, line)
			}
		}
	}
	if rows != 1 {
		t.Errorf("%d rows of the use case, want 1", rows)
	}
	if !strings.Contains(md, "&lt;script&gt;alert(1)&lt;/script&gt; \\| \\[x\\](javascript:alert(2)) \\\\\\| &amp;lt;img&amp;gt; next") {
		t.Errorf("the model id is not escaped as expected:\n%s", md[:400])
	}
}
