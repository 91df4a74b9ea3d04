package bench

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteAll writes report.json, report.csv, report.md and report.html into dir.
func (r *Report) WriteAll(dir string) error {
	if err := r.Save(filepath.Join(dir, "report.json")); err != nil {
		return err
	}
	var errs []error
	for name, write := range map[string]func(io.Writer) error{
		"report.csv": r.WriteCSV, "report.md": r.WriteMarkdown, "report.html": r.WriteHTML,
	} {
		if err := WriteFile(filepath.Join(dir, name), write); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WriteFile writes a file through write, reporting a failure of either.
func WriteFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	werr := write(f)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteSummary prints what a finished sweep leaves for its operator: where
// the report is, and each use case's limit as a table.
func (r *Report) WriteSummary(w io.Writer, dir string) error {
	state := "complete"
	if !r.Complete {
		state = "INCOMPLETE: run the same command again to resume"
	}
	fmt.Fprintf(w, "\nReport (%s): %s\n  also %s, %s, %s\n\n", state, filepath.Join(dir, "report.html"),
		filepath.Join(dir, "report.md"), filepath.Join(dir, "report.csv"), filepath.Join(dir, "report.json"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "USE CASE\tCONTEXT\tOUTPUT\tTHRESHOLDS\tCAPACITY\tFIRST BREACH")
	for _, u := range r.Plan.UseCases {
		l, _ := r.limitFor(u.Name)
		breach := l.Breach
		if breach == "" {
			breach = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", u.Name, u.Context, u.Output, u.thresholdText(), l, breach)
	}
	if len(r.SafeQueue) > 0 {
		fmt.Fprintln(tw, "\nBURST CONTEXT\tTTFT LIMIT\tSAFE QUEUE DEPTH")
		for _, d := range r.SafeQueue {
			fmt.Fprintf(tw, "%d\t%gs\t%s\n", d.Context, d.TTFTMax, d.Text())
		}
	}
	return tw.Flush()
}

// WriteCSV writes one row per cell.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"mode", "context", "output", "concurrency", "requests", "failures", "success_rate", "duration_s",
		"throughput_tps", "scaling_efficiency", "queue_wait_s", "power_w", "energy_j_per_token",
		"rate_rps", "achieved_rps", "in_flight_mean", "in_flight_max"}
	stats := []string{"mean", "p50", "p90", "p95", "p99"}
	for _, m := range Metrics {
		for _, s := range stats {
			head = append(head, m.Name+"_"+s)
		}
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return f(*v)
	}
	for _, c := range r.Cells {
		failed := 0
		for _, n := range c.Failures {
			failed += n
		}
		row := []string{c.Mode, strconv.Itoa(c.Context), strconv.Itoa(c.Output), strconv.Itoa(c.Concurrency),
			strconv.Itoa(len(c.Requests)), strconv.Itoa(failed), f(c.SuccessRate), f(c.Duration), f(c.Throughput),
			f(c.Efficiency), opt(c.Queue), opt(c.Watts), opt(c.JoulesPerToken), "", "", "", ""}
		if s := c.Rate; s != nil {
			copy(row[len(row)-4:], []string{f(s.Asked), f(s.Achieved), f(s.InFlightMean), strconv.Itoa(s.InFlightMax)})
		}
		for _, m := range Metrics {
			v := c.Stats[m.Name]
			for _, s := range stats {
				row = append(row, f(v.Get(s)))
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Threshold describes a use case's thresholds the way the guidance table does.
func (u UseCase) Threshold() (ttft, speed string) {
	ttft, speed = "N/A", "N/A"
	var parts []string
	if u.TTFTMax > 0 {
		parts = append(parts, fmt.Sprintf("%gs", u.TTFTMax))
	}
	if u.E2EMax > 0 {
		parts = append(parts, fmt.Sprintf("%gs e2e", u.E2EMax))
	}
	if len(parts) > 0 {
		ttft = strings.Join(parts, ", ")
	}
	switch {
	case u.DecodeMin > 0 && u.ITLMax > 0:
		speed = fmt.Sprintf("%g tok/s, ITL %gms", u.DecodeMin, 1000*u.ITLMax)
	case u.DecodeMin > 0:
		speed = fmt.Sprintf("%g tok/s", u.DecodeMin)
	case u.ITLMax > 0:
		speed = fmt.Sprintf("ITL %gms", 1000*u.ITLMax)
	}
	if u.Statistic != "mean" {
		speed += " (" + u.Statistic + ")"
	}
	return ttft, speed
}

// Header is the report's provenance line, saying when times are simulated.
func (r *Report) Header() string {
	s := fmt.Sprintf("%s (%s API, engine %s) at %s", r.Target.Model, r.Target.API, r.Target.Engine, r.Target.URL)
	if r.Power != "" {
		s += ", GPU power from " + r.Power
	}
	if r.TimeScale != 1 {
		s += fmt.Sprintf(". Simulated server at %gx real time: every time and rate is simulated time", r.TimeScale)
	}
	if !r.Complete {
		s += ". INCOMPLETE: the sweep was interrupted; run it again with the same --out to resume"
	}
	return s
}

// WriteMarkdown writes the report's findings and tables. Every text in it
// passes through md: a model id, a URL or an error is the server's text.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	f := r.Findings()
	fmt.Fprintf(&b, "# Benchmark report\n\n%s.\n\n", md(r.Header()))
	if h := r.Hardware; h != nil {
		fmt.Fprintf(&b, "Hardware: %s.\n\n", md(h.String()))
	}
	fmt.Fprintf(&b, "## Highlights\n\n| | value | detail |\n|---|---|---|\n")
	for _, h := range r.Highlights() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", md(h.Label), md(h.Value), md(h.Detail))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "## Key findings\n\n| finding | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| Peak system throughput | %.1f tok/s @ %d concurrent requests, %d context |\n", f.PeakThroughput, f.PeakAt.Concurrency, f.PeakAt.Context)
	fmt.Fprintf(&b, "| TTFT single request | %s |\n", md(f.TTFTText()))
	fmt.Fprintf(&b, "| Generation speed single request | %s |\n", md(f.DecodeText()))
	fmt.Fprintf(&b, "| Throughput scaling | %.1fx from 1 to %d concurrent requests |\n", f.Scaling, f.PeakAt.Concurrency)
	fmt.Fprintf(&b, "| Success rate | %.1f%% across %d requests |\n\n", 100*f.SuccessRate(), f.Requests)
	fmt.Fprintf(&b, "## Use case guidance\n\n| use case | context | TTFT threshold | speed threshold | capacity | first breach |\n|---|---|---|---|---|---|\n")
	for _, u := range r.Plan.UseCases {
		l, _ := r.limitFor(u.Name)
		ttft, speed := u.Threshold()
		fmt.Fprintf(&b, "| %s | %d/%d | %s | %s | %s | %s |\n", md(u.Name), u.Context, u.Output, md(ttft), md(speed), md(l.String()), md(l.Breach))
	}
	for _, u := range r.Plan.UseCases {
		v := r.useCaseView(u)
		fmt.Fprintf(&b, "\n## Capacity: %s (%s context, %d output tokens)\n\nThresholds: %s.\n\n", md(u.Name), ctxName(u.Context), u.Output, md(v.Thresholds))
		if len(v.Levels) > 0 {
			b.WriteString("| metric |")
			for _, n := range v.Levels {
				fmt.Fprintf(&b, " @ %d |", n)
			}
			b.WriteString("\n|---|" + strings.Repeat("---|", len(v.Levels)) + "\n")
			for _, row := range v.Rows {
				fmt.Fprintf(&b, "| %s |", md(row.Name))
				for _, v := range row.Values {
					fmt.Fprintf(&b, " %s |", md(v))
				}
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
		b.WriteString(md(strings.Join(v.Narrative, " ")) + "\n")
	}
	levels := r.levels("closed")
	for _, col := range Columns {
		if !r.Has(col, "closed") {
			continue
		}
		fmt.Fprintf(&b, "\n## %s (%s)\n\n| context |", md(col.Title), md(col.Unit))
		for _, n := range levels {
			fmt.Fprintf(&b, " n=%d |", n)
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(levels)) + "\n")
		for _, ctx := range r.contexts() {
			fmt.Fprintf(&b, "| %d |", ctx)
			for _, n := range levels {
				cell := ""
				if c, ok := r.Cell(Key{Mode: "closed", Context: ctx, Output: r.Plan.Output, Concurrency: n}); ok {
					cell, _ = col.Text(c)
				}
				fmt.Fprintf(&b, " %s |", md(cell))
			}
			b.WriteString("\n")
		}
	}
	if len(r.SafeQueue) > 0 {
		fmt.Fprintf(&b, "\n## Max safe queue depth (bursts)\n\n| context | TTFT limit | depth |\n|---|---|---|\n")
		for _, d := range r.SafeQueue {
			fmt.Fprintf(&b, "| %d | %gs | %s |\n", d.Context, d.TTFTMax, md(d.Text()))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdEscaper makes a text inert in Markdown rendered to HTML: a model id of
// "<script>…</script>" once ran in a renderer (issue 37). HTML's special
// characters become entities, which every renderer shows as text; |
// cannot end a table's cell, brackets make no link, a newline no new
// block; the backslash that escapes them is escaped itself.
var mdEscaper = strings.NewReplacer(`\`, `\\`, "&", "&amp;", "<", "&lt;", ">", "&gt;", "|", `\|`, "[", `\[`, "]", `\]`, "`", "\\`", "\n", " ", "\r", " ")

func md(s string) string { return mdEscaper.Replace(s) }
