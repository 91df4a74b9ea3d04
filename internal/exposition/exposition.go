// Package exposition reads Prometheus text-format pages that come from
// outside headroom (an engine's /metrics, a DCGM exporter) without trusting
// them: the page is size-limited, only the families the caller reads are kept,
// a panic in the parser becomes an error, and a series that appears twice is
// an error rather than a silent choice of one value.
package exposition

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"unicode"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxLine bounds one line of a page; no real exposition line comes near it.
const maxLine = 1 << 20

// Families parses the families of a page that keep accepts, reading at most
// limit bytes. Lines of other families are dropped before parsing, so a large
// page costs memory in proportion to what is kept, not to its size.
func Families(r io.Reader, limit int64, keep func(name string) bool) (mfs map[string]*dto.MetricFamily, err error) {
	return families(r, limit, keep, true)
}

// FamiliesWithoutBuckets is Families with the histograms' _bucket lines
// left out before parsing: their families keep their sums and counts, and
// no buckets. For a reader of sums and counts only (the engine's pages,
// whose queue-time and inter-token-latency buckets were three quarters of
// the lines kept), whose every read would otherwise parse and allocate
// each bucket.
func FamiliesWithoutBuckets(r io.Reader, limit int64, keep func(name string) bool) (map[string]*dto.MetricFamily, error) {
	return families(r, limit, keep, false)
}

func families(r io.Reader, limit int64, keep func(name string) bool, buckets bool) (mfs map[string]*dto.MetricFamily, err error) {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	kept := keptPages.Get().(*bytes.Buffer)
	defer func() {
		// The parser copies what it keeps: the lines can go back. A page
		// that kept much is left to the collector rather than held.
		if kept.Cap() <= maxPooled {
			kept.Reset()
			keptPages.Put(kept)
		}
	}()
	err = filter(lr, keep, buckets, kept)
	if lr.N <= 0 {
		return nil, fmt.Errorf("page larger than %d bytes", limit)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		// The parser reads text from servers headroom does not control; a bug
		// in it must cost this page, not the process (prometheus/common#922).
		if p := recover(); p != nil {
			mfs, err = nil, fmt.Errorf("parse metrics: parser panic: %v", p)
		}
	}()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err = p.TextToMetricFamilies(bytes.NewReader(kept.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	if err := duplicates(mfs); err != nil {
		return nil, err
	}
	return mfs, nil
}

// readers are filter's line readers: an engine is scraped every few
// seconds per target, and a fleet's scrapes each made a 64 KiB buffer.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// keptPages are the lines filter keeps, until they are parsed: a fleet
// reads a few hundred engine pages a second, and each grew a buffer of its
// own (a sixth of what reading one allocated).
var keptPages = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled is the largest kept page's buffer that goes back to keptPages.
const maxPooled = 1 << 20

// filter copies the lines of kept families into out: samples by their
// metric name (a histogram's _bucket, _sum and _count lines by the
// family's), and # HELP and # TYPE lines by the name they describe. Other
// comments are dropped; so are the _bucket lines of kept families where
// buckets is false.
func filter(r io.Reader, keep func(string) bool, buckets bool, out *bytes.Buffer) error {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil) // holds no page, nor its connection, while pooled
		readers.Put(br)
	}()
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line is read whole only if it is kept, and bounded.
			var long bytes.Buffer
			long.Write(line)
			for errors.Is(err, bufio.ErrBufferFull) && long.Len() <= maxLine {
				line, err = br.ReadSlice('\n')
				long.Write(line)
			}
			if long.Len() > maxLine {
				return fmt.Errorf("parse metrics: line %d longer than %d bytes", n, maxLine)
			}
			line = long.Bytes()
		}
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(line)) > 0 {
				// The format ends every line, the last too, with a line feed:
				// a page without one was cut short.
				return fmt.Errorf("parse metrics: page truncated in line %d", n)
			}
			return nil
		}
		name := lineName(line)
		if name == "" && len(bytes.TrimSpace(line)) > 0 && !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			return fmt.Errorf("parse metrics: line %d has no metric name: %.40q", n, line)
		}
		if name != "" && keepName(name, keep, buckets) {
			out.Write(line)
		}
		if err != nil {
			return fmt.Errorf("read metrics: %w", err)
		}
	}
}

// lineName is the metric name a line is about, "" for a line of no family.
func lineName(line []byte) string {
	s := bytes.TrimSpace(line)
	if bytes.HasPrefix(s, []byte("#")) {
		// The first two of bytes.Fields(s[1:]), without the slice of every
		// field it makes.
		kw, rest := field(s[1:])
		name, _ := field(rest)
		if len(name) > 0 && (string(kw) == "HELP" || string(kw) == "TYPE") {
			return string(name)
		}
		return ""
	}
	if i := bytes.IndexAny(s, "{ \t"); i >= 0 {
		s = s[:i]
	}
	return string(s)
}

// field is b's first field as bytes.Fields splits (on Unicode white
// space), and what follows it.
func field(b []byte) (f, rest []byte) {
	b = bytes.TrimLeftFunc(b, unicode.IsSpace)
	if i := bytes.IndexFunc(b, unicode.IsSpace); i >= 0 {
		return b[:i], b[i:]
	}
	return b, nil
}

func keepName(name string, keep func(string) bool, buckets bool) bool {
	if keep(name) {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok && keep(base) {
			return buckets || suf != "_bucket"
		}
	}
	return false
}

// duplicates reports a series listed twice in one family: which of its
// values is current cannot be known, so neither is used.
func duplicates(mfs map[string]*dto.MetricFamily) error {
	for name, mf := range mfs {
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			k := Labels(m)
			if seen[k] {
				return fmt.Errorf("parse metrics: duplicate series %s{%s}", name, k)
			}
			seen[k] = true
		}
	}
	return nil
}

// Labels is a metric's label set as sorted name="value" pairs.
func Labels(m *dto.Metric) string {
	pairs := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}
