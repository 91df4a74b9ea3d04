package collector

import (
	"bufio"
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// TextWriter is a collector that also writes its families straight in the
// text format (0.0.4) or OpenMetrics 1.0, series by series, as expfmt
// writes what the registry gathers, without the registry's per-series
// structures: at
// 1,000 targets the probe and capacity families are about a million lines,
// which Gather built in full before writing any (hundreds of MB a scrape,
// docs/operations.md). The daemon's /metrics serves the text format this
// way (internal/daemon's metricsHandler) and protobuf through the
// registry.
type TextWriter interface {
	prometheus.Collector
	// WriteText writes every family that has a series, each once, in the
	// text format, or with openMetrics in OpenMetrics 1.0 (without the
	// closing # EOF, which the page's writer adds).
	WriteText(w *bufio.Writer, openMetrics bool) error
}

// text writes the text format as expfmt.MetricFamilyToText does, or with
// om OpenMetrics as expfmt.MetricFamilyToOpenMetrics does (without
// created lines, as promhttp's default). Names are the collectors' own,
// valid in the legacy scheme: they are written as they are.
type text struct {
	w   *bufio.Writer
	om  bool
	num []byte
}

var posInf = math.Inf(1)

var (
	helpEscaper       = strings.NewReplacer("\\", `\\`, "\n", `\n`)
	quotedHelpEscaper = strings.NewReplacer("\\", `\\`, "\n", `\n`, "\"", `\"`)
)

// header writes a family's HELP and TYPE lines. OpenMetrics names a
// counter family without its _total.
func (t *text) header(name, help, typ string) {
	if t.om && typ == "counter" {
		name = strings.TrimSuffix(name, "_total")
	}
	t.w.WriteString("# HELP ")
	t.w.WriteString(name)
	t.w.WriteByte(' ')
	if t.om {
		quotedHelpEscaper.WriteString(t.w, help)
	} else {
		helpEscaper.WriteString(t.w, help)
	}
	t.w.WriteString("\n# TYPE ")
	t.w.WriteString(name)
	t.w.WriteByte(' ')
	t.w.WriteString(typ)
	t.w.WriteByte('\n')
}

// sample writes one line: name and suffix, the labels (name, value pairs,
// sorted by name), le where hasLE, and the value.
func (t *text) sample(name, suffix string, labels []string, hasLE bool, le, v float64) {
	t.line(name, suffix, labels, hasLE, le)
	t.float(v)
	t.w.WriteByte('\n')
}

// count writes a histogram's bucket or count line, an integer in
// OpenMetrics.
func (t *text) count(name, suffix string, labels []string, hasLE bool, le float64, n uint64) {
	if !t.om {
		t.sample(name, suffix, labels, hasLE, le, float64(n))
		return
	}
	t.line(name, suffix, labels, hasLE, le)
	t.num = strconv.AppendUint(t.num[:0], n, 10)
	t.w.Write(t.num)
	t.w.WriteByte('\n')
}

// line writes a sample's line up to its value.
func (t *text) line(name, suffix string, labels []string, hasLE bool, le float64) {
	t.w.WriteString(name)
	t.w.WriteString(suffix)
	sep := byte('{')
	for i := 0; i+1 < len(labels); i += 2 {
		t.w.WriteByte(sep)
		t.w.WriteString(labels[i])
		t.w.WriteString(`="`)
		t.value(labels[i+1])
		t.w.WriteByte('"')
		sep = ','
	}
	if hasLE {
		t.w.WriteByte(sep)
		t.w.WriteString(`le="`)
		t.float(le)
		t.w.WriteByte('"')
		sep = ','
	}
	if sep == ',' {
		t.w.WriteByte('}')
	}
	t.w.WriteByte(' ')
}

// value writes a label value escaped as expfmt escapes it.
func (t *text) value(s string) {
	if !strings.ContainsAny(s, "\\\n\"") {
		t.w.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			t.w.WriteString(`\\`)
		case '\n':
			t.w.WriteString(`\n`)
		case '"':
			t.w.WriteString(`\"`)
		default:
			t.w.WriteByte(c)
		}
	}
}

// float writes a number as expfmt's writeFloat does, or in OpenMetrics
// its writeOpenMetricsFloat (an integer ends in .0).
func (t *text) float(f float64) {
	switch {
	case t.om && f == 1:
		t.w.WriteString("1.0")
	case t.om && f == 0:
		t.w.WriteString("0.0")
	case t.om && f == -1:
		t.w.WriteString("-1.0")
	case f == 1:
		t.w.WriteByte('1')
	case f == 0:
		t.w.WriteByte('0')
	case f == -1:
		t.w.WriteString("-1")
	case math.IsNaN(f):
		t.w.WriteString("NaN")
	case math.IsInf(f, +1):
		t.w.WriteString("+Inf")
	case math.IsInf(f, -1):
		t.w.WriteString("-Inf")
	default:
		t.num = strconv.AppendFloat(t.num[:0], f, 'g', -1, 64)
		if t.om && !bytes.ContainsAny(t.num, "e.") {
			t.num = append(t.num, '.', '0')
		}
		t.w.Write(t.num)
	}
}
