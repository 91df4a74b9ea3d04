// Package dashboards builds headroom's Grafana dashboards as code with
// grafana-foundation-sdk. `go generate ./dashboards` writes them as JSON; a
// test fails when the committed JSON drifts from this code.
package dashboards

//lint:file-ignore SA1019 The SDK's current API is dashboardv2, written as dashboard.grafana.app/v2 resources, which Grafana 12 loads only with its experimental Dynamic Dashboards toggle and which file provisioning (compose, Helm, kustomize) does not load; classic JSON loads in Grafana 12 and 13 alike. The v2 build is kept on the dashboards-v2 branch (issue 39).

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

//go:generate go run ./gen

func ptr[T any](v T) *T { return &v }

var ds = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

// Label selectors the dashboards' variables fill in.
const (
	selT  = `target=~"$target"`
	selTS = `target=~"$target", scenario=~"$scenario"`
	selTU = `target=~"$target", use_case=~"$use_case"`
	selPU = `pool=~"$pool", use_case=~"$use_case"`
)

type query struct{ expr, legend string }

func q(expr, legend string) query { return query{expr, legend} }

func series(title, desc, unit string, qs ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Height(8).Span(12)
	for _, x := range qs {
		p.WithTarget(prometheus.NewDataqueryBuilder().Expr(x.expr).LegendFormat(x.legend).Range())
	}
	return p
}

// burstSeries draws calibration bursts' measurements as orange points, the
// bursts' colour on the status page and in the annotations: a burst is a
// few probes at one moment, load headroom adds on purpose, and no line
// through it should read as what users meet.
func burstSeries(title, desc, unit string, qs ...query) *timeseries.PanelBuilder {
	return series(title, desc, unit, qs...).DrawStyle(common.GraphDrawStylePoints).PointSize(6).
		ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdShades).FixedColor("orange"))
}

func single(title, desc, unit string, x query) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Height(6).Span(8).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(x.expr).LegendFormat(x.legend).Instant())
}

func variable(name, label, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(ds).
		Query(dashboard.StringOrMap{String: ptr(query)}).Multi(true).IncludeAll(true).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged)
}

func base(uid, title, desc string, vars ...string) *dashboard.DashboardBuilder {
	b := dashboard.NewDashboardBuilder(title).Uid(uid).Description(desc).Tags([]string{"headroom", "llm"}).
		Refresh("1m").Time("now-6h", "now").Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(variable("target", "Target", "label_values(headroom_target_info, target)")).
		// Every headroom dashboard links to the others, keeping the time
		// range and the variables.
		Link(dashboard.NewDashboardLinkBuilder("headroom").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"headroom"}).AsDropdown(true).KeepTime(true).IncludeVars(true)).
		// A reload can change thresholds, use cases and targets: mark it
		// where the curves may jump.
		Annotation(dashboard.NewAnnotationQueryBuilder().Name("Config reloads").Datasource(ds).Enable(true).
			IconColor("purple").Expr(`changes(headroom_config_last_reload_success_timestamp_seconds[2m]) > 0`).
			TitleFormat("headroom configuration reloaded on {{instance}}").Step("1m")).
		// A burst is load headroom added on purpose: mark it where the
		// latencies jump.
		Annotation(dashboard.NewAnnotationQueryBuilder().Name("Calibration bursts").Datasource(ds).Enable(true).
			IconColor("orange").Expr(`changes(headroom_calibration_bursts_total{target=~"$target"}[2m]) > 0`).
			TitleFormat("calibration burst of {{scenario}} on {{target}}").Step("1m"))
	for _, v := range vars {
		switch v {
		case "scenario":
			b.WithVariable(variable("scenario", "Scenario", `label_values(headroom_probes_total{target=~"$target"}, scenario)`))
		case "use_case":
			b.WithVariable(variable("use_case", "Use case", "label_values(headroom_slo_threshold, use_case)"))
		case "pool":
			b.WithVariable(variable("pool", "Pool", "label_values(headroom_target_info, pool)"))
		}
	}
	return b
}

// A probe histogram's mean and quantiles per target and scenario, from
// its classic series or, where probe_histograms is native (and for the
// calibration histograms, which are native only), its native one.
func mean(h string) string {
	native := `sum by (target, scenario) (rate(` + h + `{` + selTS + `}[$__rate_interval]))`
	return `sum by (target, scenario) (rate(` + h + `_sum{` + selTS + `}[$__rate_interval])) / sum by (target, scenario) (rate(` + h + `_count{` + selTS + `}[$__rate_interval]))` +
		` or histogram_sum(` + native + `) / histogram_count(` + native + `)`
}

func quantile(qv, h string) string {
	return `histogram_quantile(` + qv + `, sum by (le, target, scenario) (rate(` + h + `_bucket{` + selTS + `}[$__rate_interval])))` +
		` or histogram_quantile(` + qv + `, sum by (target, scenario) (rate(` + h + `{` + selTS + `}[$__rate_interval])))`
}

// engineDesc says where the engine panels' series come from.
const engineDesc = "From the inference servers' own /metrics, scraped by Prometheus directly (vLLM's and SGLang's names), over every request they served, production's included."

// engineQuantile and engineMean read an engine histogram by its vLLM name
// or, failing that, its SGLang one.
func engineQuantile(qv, vllm, sglang string) string {
	f := func(h string) string {
		return `histogram_quantile(` + qv + `, sum by (le, instance) (rate(` + h + `_bucket[$__rate_interval])))`
	}
	return f("vllm:"+vllm) + " or " + f("sglang:"+sglang)
}

func engineMean(vllm, sglang string) string {
	f := func(h string) string {
		return `sum by (instance) (rate(` + h + `_sum[$__rate_interval])) / sum by (instance) (rate(` + h + `_count[$__rate_interval]))`
	}
	return f("vllm:"+vllm) + " or " + f("sglang:"+sglang)
}

// threshold draws each use case's threshold of an SLO for the use cases
// whose scenario is selected, labelled with that scenario: a 2 s TTFT
// maximum of a 1K use case says nothing of a 96K scenario's TTFT.
func threshold(slo string) query {
	return q(`max by (use_case, scenario) (headroom_slo_threshold{use_case=~"$use_case", slo="`+slo+`"}`+
		` * on (use_case) group_left (scenario) headroom_use_case_info{scenario=~"$scenario"})`, "threshold {{use_case}} ({{scenario}})")
}

// Capacity is the capacity-headroom dashboard.
func Capacity() *dashboard.DashboardBuilder {
	return base("headroom-capacity", "headroom / Capacity headroom",
		"How many more concurrent requests each target takes before a use case's thresholds break.", "use_case", "pool").
		WithRow(dashboard.NewRowBuilder("Now")).
		WithPanel(single("Headroom", "1 - load / capacity: the share of capacity still free for the use case.", "percentunit",
			q(`headroom_ratio{`+selTU+`}`, "{{target}} {{use_case}}"))).
		WithPanel(single("Free requests", "Capacity minus current load: concurrent requests that still fit.", "short",
			q(`headroom_free_requests{`+selTU+`}`, "{{target}} {{use_case}}"))).
		WithPanel(single("SLO margin", "Smallest relative margin to a threshold over the use case's window; below 0 the SLO is breached.", "percentunit",
			q(`headroom_slo_margin_ratio{`+selTU+`}`, "{{target}} {{use_case}}"))).
		// Per pool: the recording rules of alerts/headroom.rules.yml.
		WithRow(dashboard.NewRowBuilder("Pools")).
		WithPanel(series("Free requests per pool", "Concurrent requests that still fit, summed over the pool's targets with an estimate.", "short",
			q(`pool_use_case:headroom_free_requests:sum{`+selPU+`}`, "{{pool}} {{use_case}}"))).
		WithPanel(series("Capacity per pool", "Estimated capacity summed over the pool's targets with an estimate.", "short",
			q(`pool_use_case:headroom_capacity_requests:sum{`+selPU+`}`, "{{pool}} {{use_case}}"))).
		WithPanel(series("Worst headroom in the pool", "The lowest share of capacity free among the pool's targets: one busy target while the pool has room is a balancing problem.", "percentunit",
			q(`pool_use_case:headroom_ratio:min{`+selPU+`}`, "{{pool}} {{use_case}}"))).
		WithPanel(series("Targets with and without an estimate", "How many of the pool's targets the sums cover, and how many they leave out for want of an estimate.", "short",
			q(`pool_use_case:headroom_targets_estimated:count{`+selPU+`}`, "estimated {{pool}} {{use_case}}"),
			q(`pool_use_case:headroom_targets_unestimated:count{`+selPU+`}`, "no estimate {{pool}} {{use_case}}"))).
		// Observe only: what an autoscaler reading the pool rules' signal
		// would set, beside what the pool has (docs/operations.md#autoscaling).
		WithRow(dashboard.NewRowBuilder("What the autoscaler would do")).
		WithPanel(series("Replicas: the pool has, an autoscaler would set", "The pool's targets beside the signal the KEDA and HPA examples scale on: up at once when the load needs more, down by one only after the survivors have held it for the stabilization window. Unstabilized: the rules' reading of this minute.", "short",
			q(`pool:headroom_targets:count{pool=~"$pool"}`, "has {{pool}}"),
			q(`pool:headroom_replicas_desired:stabilized{pool=~"$pool"}`, "would set {{pool}}"),
			q(`pool:headroom_replicas_desired:max{pool=~"$pool"}`, "unstabilized {{pool}}"))).
		WithPanel(series("Replicas needed, and why", "Per use case, the replicas of the pool's average capacity lower bound that carry its load with the configured headroom free; the reason series names the use case and threshold that set the most.", "short",
			q(`pool_use_case:headroom_replicas_needed:ceil{`+selPU+`}`, "{{pool}} {{use_case}}"),
			q(`pool_use_case_slo:headroom_replicas_needed:binding{`+selPU+`}`, "set by {{pool}} {{use_case}} {{slo}}"))).
		WithPanel(series("Survivors' share if one replica went", "The busiest target's load times N/(N-1) over its capacity's lower bound: one replica fewer is safe while every use case's stays under 1 - headroom and every target has an estimate.", "percentunit",
			q(`pool_use_case:headroom_survivor_lower_used:ratio{`+selPU+`}`, "{{pool}} {{use_case}}"))).
		WithPanel(series("Time until the pool's free requests run out", "At the last 30 minutes' trend of the pool's summed free requests; empty while they do not fall. PoolCapacityExhaustionForecast fires under 30 minutes.", "s",
			q(`pool_use_case:headroom_free_requests_exhaustion_seconds:deriv30m{`+selPU+`}`, "{{pool}} {{use_case}}"))).
		WithRow(dashboard.NewRowBuilder("Over time")).
		WithPanel(series("Capacity vs load", "Estimated capacity per use case and the requests in flight.", "short",
			q(`headroom_capacity_requests{`+selTU+`}`, "capacity {{target}} {{use_case}}"),
			q(`headroom_load_requests{`+selT+`}`, "load {{target}}"))).
		WithPanel(series("Capacity and its bounds", "The fitted model's capacity and the 95% band around it; where only the lower bound shows, the data cannot yet place the threshold (requests together have not come near it), and the capacity is at least that.", "short",
			q(`headroom_capacity_requests{`+selTU+`}`, "estimate {{target}} {{use_case}}"),
			q(`headroom_capacity_lower_requests{`+selTU+`}`, "lower {{target}} {{use_case}}"),
			q(`headroom_capacity_upper_requests{`+selTU+`} < +Inf`, "upper {{target}} {{use_case}}"))).
		WithPanel(series("Headroom", "Free requests over capacity, over time.", "percentunit",
			q(`headroom_ratio{`+selTU+`}`, "{{target}} {{use_case}}"))).
		WithPanel(series("SLO margin", "Below 0 the use case breaches a threshold at the current load.", "percentunit",
			q(`headroom_slo_margin_ratio{`+selTU+`}`, "{{target}} {{use_case}}"))).
		WithPanel(series("Time to exhaustion", "At the last hour's trend, how long until headroom reaches zero; empty while headroom grows.", "s",
			q(`headroom_ratio{`+selTU+`} / -deriv(headroom_ratio{`+selTU+`}[1h]) > 0`, "{{target}} {{use_case}}"))).
		WithPanel(series("Observations behind the estimate", "Lone probes, calibration bursts and bench cells each use case's model rests on; an estimate needs one request alone and requests sent together at another level.", "short",
			q(`headroom_capacity_samples{`+selTU+`}`, "{{target}} {{use_case}}")))
}

// Latency is the probe-latency dashboard.
func Latency() *dashboard.DashboardBuilder {
	return base("headroom-latency", "headroom / Probe latency",
		"What one synthetic user sees per scenario: TTFT, inter-token latency, decode speed, end-to-end time. Lone probes only; calibration bursts have their own row.", "scenario", "use_case").
		WithRow(dashboard.NewRowBuilder("User-facing latency")).
		WithPanel(series("Time to first token", "Request sent to first content token: mean and p90 of lone probes, with the use cases' thresholds.", "s",
			q(mean("headroom_probe_ttft_seconds"), "mean {{target}} {{scenario}}"),
			q(quantile("0.9", "headroom_probe_ttft_seconds"), "p90 {{target}} {{scenario}}"),
			threshold("ttft_seconds"))).
		WithPanel(series("Decode speed", "Per-user tokens per second from the server's token count, with the use cases' minima.", "short",
			q(mean("headroom_probe_decode_tokens_per_second"), "mean {{target}} {{scenario}}"),
			threshold("decode_tokens_per_second"))).
		WithPanel(series("Inter-token latency", "Decode time / (output tokens - 1) per probe.", "s",
			q(mean("headroom_probe_itl_seconds"), "mean {{target}} {{scenario}}"),
			threshold("itl_seconds"))).
		WithPanel(series("End-to-end", "Request sent to last token, with the use cases' maxima.", "s",
			q(mean("headroom_probe_e2e_seconds"), "mean {{target}} {{scenario}}"),
			threshold("e2e_seconds"))).
		WithPanel(heatmap.NewPanelBuilder().Title("TTFT distribution").Description("Probes per TTFT bucket over time.").
			Datasource(ds).Height(8).Span(12).Unit("s").Calculate(false).
			WithTarget(prometheus.NewDataqueryBuilder().
				Expr(`sum by (le) (increase(headroom_probe_ttft_seconds_bucket{` + selTS + `}[$__rate_interval]))`).
				Format(prometheus.PromQueryFormatHeatmap).LegendFormat("{{le}}"))).
		WithPanel(series("Prefill speed", "Prompt tokens / TTFT per probe.", "short",
			q(mean("headroom_probe_prefill_tokens_per_second"), "{{target}} {{scenario}}"))).
		// Apart from the SLO panels: a burst's probes queue behind one
		// another on purpose (headroom_calibration_*, issue 41).
		WithRow(dashboard.NewRowBuilder("Calibration bursts: load headroom adds on purpose")).
		WithPanel(burstSeries("Burst TTFT", "Mean time to first token of each calibration burst's probes, sent together to measure the burst curve: they queue behind one another, so this is no user's latency and no SLO panel or alert reads it.", "s",
			q(mean("headroom_calibration_ttft_seconds"), "burst {{target}} {{scenario}}"))).
		WithPanel(burstSeries("Burst decode speed", "Mean per-user decode speed of each calibration burst's probes, decoding together.", "short",
			q(mean("headroom_calibration_decode_tokens_per_second"), "burst {{target}} {{scenario}}"))).
		WithPanel(burstSeries("Burst probe results", "Calibration bursts' probes per result; the lone probes' are under Probe results.", "short",
			q(`sum by (target, scenario, result) (increase(headroom_calibration_probes_total{`+selTS+`}[$__rate_interval]))`, "{{target}} {{scenario}} {{result}}"))).
		WithRow(dashboard.NewRowBuilder("The engine's own view: every request")).
		WithPanel(series("Engine TTFT, all requests", engineDesc+" Time to first token, p90.", "s",
			q(engineQuantile("0.9", "time_to_first_token_seconds", "time_to_first_token_seconds"), "p90 {{instance}}"))).
		WithPanel(series("Engine inter-token latency, all requests", engineDesc+" Mean time between tokens.", "s",
			q(engineMean("inter_token_latency_seconds", "inter_token_latency_seconds"), "mean {{instance}}"))).
		WithPanel(series("Engine queue time, all requests", engineDesc+" Mean time in the waiting queue.", "s",
			q(engineMean("request_queue_time_seconds", "queue_time_seconds"), "mean {{instance}}"))).
		WithRow(dashboard.NewRowBuilder("Server side and probes")).
		WithPanel(series("Queue wait", "Server-side queue time of probes, from the engine's histogram; only probes that were alone in leaving the queue.", "s",
			q(mean("headroom_probe_queue_wait_seconds"), "{{target}} {{scenario}}"))).
		WithPanel(series("Longest stall", "Longest gap between two chunks of a probe.", "s",
			q(quantile("0.9", "headroom_probe_stall_seconds"), "p90 {{target}} {{scenario}}"))).
		WithPanel(series("Probe results", "Lone probes per result: success, connect_error, http_error, timeout, stream_error, short_output, prompt_mismatch, usage_mismatch.", "short",
			q(`sum by (target, scenario, result) (increase(headroom_probes_total{`+selTS+`}[$__rate_interval]))`, "{{target}} {{scenario}} {{result}}"))).
		WithPanel(series("Probe cost", "Share of each target's time with a probe in flight, calibration bursts included (the probe budget caps it).", "percentunit",
			q(`rate(headroom_probe_busy_seconds_total{`+selT+`}[$__rate_interval])`, "{{target}}"))).
		WithPanel(series("Prompt length", "Prompt tokens of the last probe as the server counted them.", "short",
			q(`headroom_probe_input_tokens{`+selTS+`}`, "{{target}} {{scenario}}")))
}

// Server is the server-and-GPU dashboard.
func Server() *dashboard.DashboardBuilder {
	return base("headroom-server", "headroom / Server & GPU",
		"What the inference servers and their GPUs report about themselves.").
		WithPanel(series("Requests", "Running and waiting requests from the engine's own metrics.", "short",
			q(`headroom_target_requests{`+selT+`}`, "{{target}} {{state}}"))).
		WithPanel(series("KV-cache usage", "Share of the KV cache in use.", "percentunit",
			q(`headroom_target_kv_cache_usage_ratio{`+selT+`}`, "{{target}}"))).
		WithPanel(series("GPU power", "Power draw per GPU, and its enforced limit.", "watt",
			q(`headroom_gpu_power_watts{`+selT+`}`, "{{target}} GPU {{gpu}}"),
			q(`headroom_gpu_power_limit_watts{`+selT+`}`, "limit GPU {{gpu}}"))).
		WithPanel(series("Energy per token", "Energy of a target's GPUs per generated token over 5 minutes.", "J",
			q(`headroom_energy_joules_per_token{`+selT+`}`, "{{target}}"))).
		WithPanel(series("Metrics endpoint up", "1 when headroom could read the server's own /metrics.", "short",
			q(`headroom_target_up{`+selT+`}`, "{{target}}")))
}

// All returns every dashboard by file name.
func All() map[string]*dashboard.DashboardBuilder {
	return map[string]*dashboard.DashboardBuilder{
		"capacity.json": Capacity(),
		"latency.json":  Latency(),
		"server.json":   Server(),
	}
}

// JSON builds a dashboard and returns its JSON as committed.
func JSON(b *dashboard.DashboardBuilder) ([]byte, error) {
	d, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("build dashboard: %w", err)
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
