// Package contract is headroom's metric contract: every metric it exports,
// with its type and labels. Dashboards, alert rules and users' queries
// depend on these names, so the daemon's /metrics, README's metric table,
// the dashboards and the rules are all checked against this one table. A
// name changes only with a strong reason, everywhere at once.
package contract

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Metric is one exported metric family.
type Metric struct {
	Name   string
	Type   string   // counter, gauge or histogram
	Labels []string // sorted
}

// Metrics is the contract.
var Metrics = []Metric{
	{"headroom_probe_ttft_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_probe_itl_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_probe_decode_tokens_per_second", "histogram", []string{"scenario", "target"}},
	{"headroom_probe_e2e_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_probe_prefill_tokens_per_second", "histogram", []string{"scenario", "target"}},
	{"headroom_probe_queue_wait_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_probe_stall_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_probe_input_tokens", "gauge", []string{"scenario", "target"}},
	{"headroom_probes_total", "counter", []string{"result", "scenario", "target"}},
	{"headroom_probe_last_success_timestamp_seconds", "gauge", []string{"scenario", "target"}},
	{"headroom_probe_busy_seconds_total", "counter", []string{"target"}},
	{"headroom_calibration_bursts_total", "counter", []string{"scenario", "target"}},
	{"headroom_calibration_ttft_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_calibration_itl_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_calibration_decode_tokens_per_second", "histogram", []string{"scenario", "target"}},
	{"headroom_calibration_e2e_seconds", "histogram", []string{"scenario", "target"}},
	{"headroom_calibration_probes_total", "counter", []string{"result", "scenario", "target"}},
	{"headroom_target_info", "gauge", []string{"engine", "model", "pool", "target", "url"}},
	{"headroom_target_up", "gauge", []string{"target"}},
	{"headroom_target_requests", "gauge", []string{"state", "target"}},
	{"headroom_target_kv_cache_usage_ratio", "gauge", []string{"target"}},
	{"headroom_load_requests", "gauge", []string{"target"}},
	{"headroom_slo_threshold", "gauge", []string{"slo", "use_case"}},
	{"headroom_slo_margin_ratio", "gauge", []string{"target", "use_case"}},
	{"headroom_capacity_requests", "gauge", []string{"target", "use_case"}},
	{"headroom_free_requests", "gauge", []string{"target", "use_case"}},
	{"headroom_ratio", "gauge", []string{"target", "use_case"}},
	{"headroom_capacity_samples", "gauge", []string{"target", "use_case"}},
	{"headroom_capacity_lower_requests", "gauge", []string{"target", "use_case"}},
	{"headroom_capacity_upper_requests", "gauge", []string{"target", "use_case"}},
	{"headroom_slo_capacity_lower_requests", "gauge", []string{"slo", "target", "use_case"}},
	{"headroom_use_case_info", "gauge", []string{"scenario", "use_case"}},
	{"headroom_gpu_power_watts", "gauge", []string{"gpu", "target", "uuid"}},
	{"headroom_gpu_energy_joules_total", "counter", []string{"gpu", "target", "uuid"}},
	{"headroom_gpu_power_limit_watts", "gauge", []string{"gpu", "target", "uuid"}},
	{"headroom_energy_joules_per_token", "gauge", []string{"target"}},
	{"headroom_build_info", "gauge", []string{"branch", "goarch", "goos", "goversion", "revision", "tags", "version"}},
	{"headroom_targets", "gauge", []string{"source", "state"}},
	{"headroom_config_last_reload_successful", "gauge", nil},
	{"headroom_config_last_reload_success_timestamp_seconds", "gauge", nil},
}

// MaxLabelValue is the longest label value headroom exports, in bytes: a
// target's name, pool, model and URL, whether from the configuration, from
// discovery or from the server's model list. A 100 KB name once rode on
// every series of its target.
const MaxLabelValue = 1024

var suffix = regexp.MustCompile(`_(bucket|count|sum)$`)

// Lookup finds the metric a series name belongs to, reading a histogram's
// _bucket, _count and _sum series as the histogram.
func Lookup(series string) (Metric, bool) {
	i := slices.IndexFunc(Metrics, func(m Metric) bool { return m.Name == series })
	if i < 0 {
		base := suffix.ReplaceAllString(series, "")
		i = slices.IndexFunc(Metrics, func(m Metric) bool { return m.Name == base && m.Type == "histogram" })
	}
	if i < 0 {
		return Metric{}, false
	}
	return Metrics[i], true
}

// Has reports whether a series name belongs to a contract metric.
func Has(series string) bool {
	_, ok := Lookup(series)
	return ok
}

// Check holds metric families as a page carries them to the contract:
// each headroom_ family is in it, with its type and labels. The error
// joins every violation.
func Check(families map[string]*dto.MetricFamily) error {
	var errs []error
	for name, mf := range families {
		if !strings.HasPrefix(name, "headroom_") {
			continue
		}
		c, ok := Lookup(name)
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not in the metric contract", name))
			continue
		}
		if typ := strings.ToLower(mf.GetType().String()); typ != c.Type {
			errs = append(errs, fmt.Errorf("%s is a %s, the contract says %s", name, typ, c.Type))
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName())
			}
			slices.Sort(labels)
			if !slices.Equal(labels, c.Labels) {
				errs = append(errs, fmt.Errorf("%s has labels %v, the contract %v", name, labels, c.Labels))
				break
			}
		}
	}
	return errors.Join(errs...)
}
