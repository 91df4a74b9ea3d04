package daemon

import (
	"bufio"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/headroom-dev/headroom/collector"
)

// metricsHandler serves /metrics: in the text format and OpenMetrics 1.0
// (what Prometheus asks for without native histograms), the registry's
// families and then each of streamed's written straight
// (collector.TextWriter); in any other format (protobuf, OpenMetrics
// 2.0), all of them through promhttp. At 1,000 targets the streamed
// families are about a million lines, which the registry would build in
// full, as client_model's structures, before writing the first
// (docs/operations.md, "A fleet").
func metricsHandler(logger *slog.Logger, reg prometheus.Gatherer, streamed ...collector.TextWriter) http.Handler {
	opts := promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError)}
	others := prometheus.NewRegistry()
	for _, c := range streamed {
		others.MustRegister(c)
	}
	all := promhttp.HandlerFor(prometheus.Gatherers{reg, others}, opts)
	accepted := expfmt.DefaultOpenMetricsAcceptedFormats() // what promhttp offers with OpenMetrics on
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		format := expfmt.NegotiateAccept(r.Header, accepted...)
		om := format.FormatType() == expfmt.TypeOpenMetrics
		if !om && format.FormatType() != expfmt.TypeTextPlain || om && strings.Contains(string(format), "version="+expfmt.OpenMetricsVersion_2_0_0) {
			all.ServeHTTP(w, r)
			return
		}
		mfs, err := reg.Gather()
		if err != nil {
			// As promhttp's HTTPErrorOnError.
			logger.Error("error gathering metrics", "err", err)
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", string(format))
		var out io.Writer = w
		if gzipped(r) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Add("Vary", "Accept-Encoding")
			gz := gzips.Get().(*gzip.Writer)
			gz.Reset(w)
			defer func() {
				gz.Close()
				gzips.Put(gz)
			}()
			out = gz
		}
		bw := bufs.Get().(*bufio.Writer)
		bw.Reset(out)
		defer func() {
			bw.Reset(nil)
			bufs.Put(bw)
		}()
		enc := expfmt.NewEncoder(bw, format)
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				logger.Error("error encoding metric family", "family", mf.GetName(), "err", err)
				return
			}
		}
		for _, c := range streamed {
			if err := c.WriteText(bw, om); err != nil {
				logger.Error("error writing metrics", "err", err)
				return
			}
		}
		// OpenMetrics' closing # EOF.
		if c, ok := enc.(expfmt.Closer); ok {
			if err := c.Close(); err != nil {
				logger.Error("error encoding metrics", "err", err)
				return
			}
		}
		// A write error is the reader's: gone, or too slow.
		_ = bw.Flush()
	})
}

var (
	bufs  = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}
	gzips = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
)

// gzipped says whether the request accepts a gzipped answer.
func gzipped(r *http.Request) bool {
	for _, e := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if name, q, _ := strings.Cut(strings.TrimSpace(e), ";"); strings.TrimSpace(name) == "gzip" && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
