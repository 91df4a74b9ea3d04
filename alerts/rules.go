package alerts

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"text/template"
	"time"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/prometheus/common/model"
)

//go:embed rules.yml.tmpl
var rulesTemplate string

// [[ ]] delimits the template's actions: {{ }} is Prometheus's own, in the
// alerts' annotations.
var tmpl = template.Must(template.New("rules").Delims("[[", "]]").Funcs(template.FuncMap{
	"quote": strconv.Quote,
	"rng":   func(w string) string { return "[" + w + "]" }, // a range selector: [[ ]] would read "[[[w]]]" wrong
}).Parse(rulesTemplate))

// Windows are the burn-rate windows of the multiwindow, multi-burn-rate
// alerts (the Google SRE workbook's, as Sloth and Pyrra generate them).
var Windows = []string{"30m", "2h", "6h", "1d"}

// sli is one threshold of a use case as an error ratio over probes: the
// share of its scenario's probes past the threshold, read from the probe
// histogram's bucket at the threshold.
type sli struct {
	Record, Metric, SLO string
	Le, Threshold       string
	Minimum             bool   // errors are the probes at or below le
	Note                string // why le is not the threshold, when it is not
}

type useCase struct {
	Name, Scenario string
	SLIs           []sli
}

// Options are what the rules need beyond the configuration.
type Options struct {
	// Job is the scrape job of headroom itself, for the alert that fires
	// when it is down or absent.
	Job string
}

// native says whether cfg's probe histograms are native only: the error
// ratios then read the fraction below the threshold itself
// (histogram_fraction), where classic ones read the bucket nearest it.
func native(cfg *config.Config) bool { return cfg.ProbeHistograms == "native" }

// Rules renders the recording and alerting rules for cfg's use cases: an
// error ratio per threshold over each burn-rate window, the burn-rate
// alerts on them, and the alerts on capacity, probes, targets and headroom
// itself. alerts/headroom.rules.yml is its output for the default
// configuration.
func Rules(cfg *config.Config, opts Options) ([]byte, error) {
	var ucs []useCase
	for _, u := range cfg.UseCases {
		uc := useCase{Name: u.Name, Scenario: u.Scenario}
		add := func(metric, slo string, threshold float64, buckets []float64, minimum bool) {
			if threshold <= 0 {
				return
			}
			le, note := bucket(threshold, buckets, minimum)
			if native(cfg) {
				le, note = "", ""
			}
			record := "headroom:slo_latency_errors"
			if minimum {
				record = "headroom:slo_decode_errors"
			}
			uc.SLIs = append(uc.SLIs, sli{Record: record, Metric: metric, SLO: slo, Le: le, Threshold: strconv.FormatFloat(threshold, 'g', -1, 64), Minimum: minimum, Note: note})
		}
		add("headroom_probe_ttft_seconds", "ttft_seconds", u.TTFTMax.Seconds(), collector.LatencyBuckets, false)
		add("headroom_probe_e2e_seconds", "e2e_seconds", u.E2EMax.Seconds(), collector.LatencyBuckets, false)
		add("headroom_probe_itl_seconds", "itl_seconds", u.ITLMax.Seconds(), collector.ITLBuckets, false)
		add("headroom_probe_decode_tokens_per_second", "decode_tokens_per_second", u.DecodeMinTPS, collector.SpeedBuckets, true)
		ucs = append(ucs, uc)
	}
	if opts.Job == "" {
		opts.Job = "headroom"
	}
	var b bytes.Buffer
	h := cfg.Autoscaling.Headroom
	err := tmpl.Execute(&b, map[string]any{"UseCases": ucs, "Windows": Windows, "Job": opts.Job, "Native": native(cfg),
		"UnknownFor": unknownFor(cfg), "Headroom": strconv.FormatFloat(100*h, 'g', -1, 64) + "%",
		"Used": strconv.FormatFloat(1-h, 'g', 10, 64), "Stabilization": model.Duration(cfg.Autoscaling.ScaleDownStabilization).String()})
	if err != nil {
		return nil, fmt.Errorf("render rules: %w", err)
	}
	return b.Bytes(), nil
}

// bucket is the histogram bucket an SLI reads for a threshold: the
// threshold itself where it is a bucket's bound, else the nearest bound on
// the strict side (below a maximum, above a minimum), so that a probe the
// rules count as good met the threshold; note says so.
func bucket(threshold float64, buckets []float64, minimum bool) (le, note string) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	if slices.Contains(buckets, threshold) {
		return f(threshold), ""
	}
	i, _ := slices.BinarySearch(buckets, threshold)
	switch {
	case minimum && i < len(buckets):
		return f(buckets[i]), fmt.Sprintf("threshold %s is no bucket bound: probes at or below %s count as errors", f(threshold), f(buckets[i]))
	case !minimum && i > 0:
		return f(buckets[i-1]), fmt.Sprintf("threshold %s is no bucket bound: probes above %s count as errors", f(threshold), f(buckets[i-1]))
	case minimum:
		return "+Inf", fmt.Sprintf("threshold %s is above every bucket: every probe counts as an error", f(threshold))
	}
	return f(buckets[0]), fmt.Sprintf("threshold %s is below every bucket: probes above %s count as errors", f(threshold), f(buckets[0]))
}

// unknownFor is how long a capacity may stay unknown before the alert
// fires: an hour, the time the shipped defaults are tested to reach an
// estimate in, or the longest use case window if that is longer.
func unknownFor(cfg *config.Config) string {
	d := time.Hour
	for _, u := range cfg.UseCases {
		d = max(d, u.Window)
	}
	return model.Duration(d).String()
}
