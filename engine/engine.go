// Package engine reads what an inference server says about itself on its own
// Prometheus endpoint and normalises it across engines: requests running and
// waiting, KV-cache usage, the queue-time histogram and token counters.
package engine

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/internal/exposition"
)

// Load is one normalised reading. Unknown values are NaN.
type Load struct {
	Engine  string
	Running float64
	Waiting float64
	KVUsage float64 // 0..1
	// KVTokens is the KV cache's size in tokens, where the engine says:
	// vLLM's cache_config_info (num_gpu_blocks × block_size), SGLang's
	// max_total_num_tokens; NaN elsewhere. It bounds how many requests of
	// a shape the server admits at once (capacity.UseCase.KVTokens).
	KVTokens float64
	// QueueCount and QueueSum are the cumulative count and sum of the engine's
	// queue-time histogram; their deltas across a probe give its queue wait.
	QueueCount, QueueSum float64
	// ITLCount and ITLSum are the cumulative count and sum of the engine's
	// inter-token-latency histogram over every request it served (NaN where
	// it exports none): between two readings, the decode time per token at
	// the batch it ran, for free.
	ITLCount, ITLSum float64
	PromptTokens     float64 // cumulative
	GenerationTokens float64 // cumulative
	// PrefilledTokens is PromptTokens where the engine counts a prompt as
	// its prefill completes (vLLM, llama.cpp), NaN where it counts prompts
	// only as requests end (SGLang, TGI) or is not known to: only then does
	// its delta say how much prefill work a window of time held.
	PrefilledTokens float64
	// Model is the model_name label of the engine's running-requests
	// series (vLLM, SGLang, NIM); "" where it has none. Another model is
	// another server, whose load-response laws are not the last one's.
	Model string
	// TimeScale is the virtual seconds per wall second a time-scaled
	// `headroom sim` declares on headroom_sim_info; 1 for a real server.
	TimeScale float64
	// Queue is Waiting averaged over time by whoever follows the readings
	// (the monitor, over about a DecodeSpan): the gauge is a snapshot, and
	// one prompt caught waiting is not a standing queue. 0 where no one
	// averaged; NaN while Waiting is unknown.
	Queue float64
}

// InFlight is running + waiting, NaN when either is unknown.
func (l Load) InFlight() float64 { return l.Running + l.Waiting }

// dialect names one engine's metrics. Each list is tried in order (current
// names first, then older ones still served).
type dialect struct {
	engine    string
	running   []string
	waiting   []string
	kv        []string
	queue     []string // histogram, seconds
	itl       []string // histogram of the time between tokens, seconds
	prompt    []string // counter, or histogram whose sum counts tokens
	generated []string
	// atPrefill: the prompt counter moves as each prefill completes.
	atPrefill bool
	// custom handles engines whose numbers need arithmetic across label values.
	custom func(map[string]*dto.MetricFamily, *Load)
}

// Wrappers that re-export an engine's metrics under a prefix of their own:
// Ray Serve LLM's ray_vllm_, KServe's kserve_vllm:, and SGLang's router,
// whose /engine_metrics serves its workers' sglang: families as sglang_.
var (
	vllmPrefixes   = []string{"vllm:", "ray_vllm_", "kserve_vllm:"}
	sglangPrefixes = []string{"sglang:", "sglang_"}
)

// prefixed lists each name under each prefix, names in the order given
// (current first), each under every prefix before the next name.
func prefixed(prefixes []string, names ...string) []string {
	out := make([]string, 0, len(prefixes)*len(names))
	for _, n := range names {
		for _, p := range prefixes {
			out = append(out, p+n)
		}
	}
	return out
}

var dialects = []dialect{
	// vLLM 0.12 removed gpu_cache_usage_perc and hid time_per_output_token_seconds
	// (both deprecated in 0.11, beside kv_cache_usage_perc and
	// inter_token_latency_seconds); the V0 engine (0.6) served only the old
	// names. num_requests_waiting_by_reason is read where the total is not.
	{engine: "vllm",
		running: prefixed(vllmPrefixes, "num_requests_running"), waiting: prefixed(vllmPrefixes, "num_requests_waiting", "num_requests_waiting_by_reason"),
		kv:     prefixed(vllmPrefixes, "kv_cache_usage_perc", "gpu_cache_usage_perc"),
		queue:  prefixed(vllmPrefixes, "request_queue_time_seconds"),
		itl:    prefixed(vllmPrefixes, "inter_token_latency_seconds", "time_per_output_token_seconds"),
		prompt: prefixed(vllmPrefixes, "prompt_tokens_total", "prompt_tokens"), generated: prefixed(vllmPrefixes, "generation_tokens_total", "generation_tokens"),
		atPrefill: true},
	{engine: "sglang",
		running: prefixed(sglangPrefixes, "num_running_reqs"), waiting: prefixed(sglangPrefixes, "num_queue_reqs"),
		kv: prefixed(sglangPrefixes, "token_usage"), queue: prefixed(sglangPrefixes, "queue_time_seconds"),
		itl:    prefixed(sglangPrefixes, "inter_token_latency_seconds", "time_per_output_token_seconds"),
		prompt: prefixed(sglangPrefixes, "prompt_tokens_total", "prompt_tokens"), generated: prefixed(sglangPrefixes, "generation_tokens_total", "generation_tokens")},
	// TGI was archived upstream in March 2026: its names are read as its
	// last release served them, and no newer ones will come.
	{engine: "tgi",
		running: []string{"tgi_batch_current_size"}, waiting: []string{"tgi_queue_size"},
		queue:  []string{"tgi_request_queue_duration"},
		prompt: []string{"tgi_request_input_length"}, generated: []string{"tgi_request_generated_tokens"}},
	// llama.cpp dropped kv_cache_usage_ratio (current builds serve no KV
	// usage: n_tokens_max, formerly n_past_max, is the largest context a
	// slot has held, not a share of the cache) and counts its prompt
	// tokens as each prefill completes.
	{engine: "llamacpp",
		running: []string{"llamacpp:requests_processing"}, waiting: []string{"llamacpp:requests_deferred"},
		kv:     []string{"llamacpp:kv_cache_usage_ratio"},
		prompt: []string{"llamacpp:prompt_tokens_total"}, generated: []string{"llamacpp:tokens_predicted_total"},
		atPrefill: true, custom: llamacppITL},
	// trtllm-serve serves trtllm_* at /prometheus/metrics (Dynamo's
	// passthrough: trtllm:); its time per output token is a mean per
	// request, the nearest it has to a decode reading. Triton's
	// TensorRT-LLM backend serves nv_trt_llm_* (tritonTRTLLM).
	{engine: "trtllm",
		queue:  []string{"trtllm_request_queue_time_seconds", "trtllm:request_queue_time_seconds"},
		itl:    []string{"trtllm_time_per_output_token_seconds", "trtllm:time_per_output_token_seconds"},
		custom: tritonTRTLLM},
	{engine: "nim",
		running: []string{"num_requests_running"}, waiting: []string{"num_requests_waiting"},
		kv: []string{"gpu_cache_usage_perc"}, queue: []string{"request_queue_time_seconds"},
		itl:    []string{"time_per_output_token_seconds"},
		prompt: []string{"prompt_tokens_total"}, generated: []string{"generation_tokens_total"}},
}

// Engines lists the engines the parser understands.
func Engines() []string {
	out := make([]string, len(dialects))
	for i, d := range dialects {
		out[i] = d.engine
	}
	return out
}

// read lists every metric name some dialect reads, and the sim's info metric.
var read = func() map[string]bool {
	m := map[string]bool{"headroom_sim_info": true, "nv_trt_llm_request_metrics": true, "nv_trt_llm_kv_cache_block_metrics": true,
		"llamacpp:tokens_predicted_seconds_total": true}
	for _, n := range append(prefixed(vllmPrefixes, "cache_config_info"), prefixed(sglangPrefixes, "max_total_num_tokens")...) {
		m[n] = true
	}
	for _, d := range dialects {
		for _, names := range [][]string{d.running, d.waiting, d.kv, d.queue, d.itl, d.prompt, d.generated} {
			for _, n := range names {
				m[n] = true
			}
		}
	}
	return m
}()

// Parse reads a text-format /metrics page of at most MaxPage bytes and
// normalises it. engine "auto" detects the engine from the metric names. A
// page whose values headroom reads are not finite and non-negative is an
// error: a load of +Inf or -3 requests is no reading. Of a histogram only
// its sum and count are read, so its buckets are not parsed.
func Parse(r io.Reader, engine string) (Load, error) {
	mfs, err := exposition.FamiliesWithoutBuckets(r, MaxPage, func(name string) bool { return read[name] })
	if err != nil {
		return Load{}, err
	}
	if err := sane(mfs); err != nil {
		return Load{}, err
	}
	d, ok := pick(mfs, engine)
	if !ok {
		return Load{}, fmt.Errorf("no metrics of a known engine (%s) on the page", strings.Join(Engines(), ", "))
	}
	l := Load{Engine: d.engine,
		Running: gauge(mfs, d.running), Waiting: gauge(mfs, d.waiting), KVUsage: mean(mfs, d.kv),
		PromptTokens: counter(mfs, d.prompt), GenerationTokens: counter(mfs, d.generated)}
	l.QueueCount, l.QueueSum = histogram(mfs, d.queue)
	l.ITLCount, l.ITLSum = histogram(mfs, d.itl)
	l.PrefilledTokens = math.NaN()
	if d.atPrefill {
		l.PrefilledTokens = l.PromptTokens
	}
	l.TimeScale = timeScale(mfs)
	l.KVTokens = kvTokens(mfs)
	l.Model = modelName(mfs, d.running)
	if d.custom != nil {
		d.custom(mfs, &l)
	}
	return l, nil
}

// kvTokens is the KV cache's size in tokens from vLLM's cache_config_info
// labels or SGLang's gauge; NaN where neither says, or says nonsense.
func kvTokens(mfs map[string]*dto.MetricFamily) float64 {
	if mf, ok := first(mfs, prefixed(vllmPrefixes, "cache_config_info")); ok {
		var blocks, size float64
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			v, err := strconv.ParseFloat(lp.GetValue(), 64)
			switch {
			case err != nil:
			case lp.GetName() == "num_gpu_blocks":
				blocks = v
			case lp.GetName() == "block_size":
				size = v
			}
		}
		if t := blocks * size; t > 0 && !math.IsInf(t, 0) {
			return t
		}
	}
	if v := gauge(mfs, prefixed(sglangPrefixes, "max_total_num_tokens")); v > 0 && !math.IsInf(v, 0) {
		return v
	}
	return math.NaN()
}

// modelName is the model_name label of the first series of the first of
// names on the page, "" where it has none.
func modelName(mfs map[string]*dto.MetricFamily, names []string) string {
	mf, ok := first(mfs, names)
	if !ok {
		return ""
	}
	for _, lp := range mf.GetMetric()[0].GetLabel() {
		if lp.GetName() == "model_name" {
			return lp.GetValue()
		}
	}
	return ""
}

func timeScale(mfs map[string]*dto.MetricFamily) float64 {
	if mf, ok := mfs["headroom_sim_info"]; ok && len(mf.GetMetric()) > 0 {
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			if lp.GetName() != "time_scale" {
				continue
			}
			if v, err := strconv.ParseFloat(lp.GetValue(), 64); err == nil && v > 0 {
				return v
			}
		}
	}
	return 1
}

func pick(mfs map[string]*dto.MetricFamily, engine string) (dialect, bool) {
	for _, d := range dialects {
		if engine != "auto" && engine != d.engine {
			continue
		}
		if engine != "auto" {
			return d, true
		}
		for _, names := range [][]string{d.running, d.kv, d.queue} {
			if _, ok := first(mfs, names); ok {
				return d, true
			}
		}
		if d.engine == "trtllm" {
			if _, ok := mfs["nv_trt_llm_request_metrics"]; ok {
				return d, true
			}
		}
	}
	return dialect{}, false
}

// sane checks every value headroom reads: counts, ratios, token counters
// and queue-time sums are all finite and non-negative.
func sane(mfs map[string]*dto.MetricFamily) error {
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := value(m)
			if m.Histogram != nil {
				v = math.Min(v, float64(m.GetHistogram().GetSampleCount()))
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("metric %s{%s} has value %g; want a finite, non-negative number", name, exposition.Labels(m), v)
			}
		}
	}
	return nil
}

func first(mfs map[string]*dto.MetricFamily, names []string) (*dto.MetricFamily, bool) {
	for _, n := range names {
		if mf, ok := mfs[n]; ok && len(mf.GetMetric()) > 0 {
			return mf, true
		}
	}
	return nil, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	case m.Histogram != nil:
		return m.GetHistogram().GetSampleSum()
	}
	return math.NaN()
}

// perGroup takes one value per (series minus tp_rank): the max across tensor
// ranks, so a series repeated per tensor rank is not double counted.
func perGroup(mf *dto.MetricFamily) []float64 {
	groups := map[string]float64{}
	for _, m := range mf.GetMetric() {
		var key []string
		for _, l := range m.GetLabel() {
			if l.GetName() != "tp_rank" {
				key = append(key, l.GetName()+"="+l.GetValue())
			}
		}
		sort.Strings(key)
		k := strings.Join(key, ",")
		v := value(m)
		if old, ok := groups[k]; !ok || v > old {
			groups[k] = v
		}
	}
	out := make([]float64, 0, len(groups))
	for _, v := range groups {
		out = append(out, v)
	}
	return out
}

func gauge(mfs map[string]*dto.MetricFamily, names []string) float64 {
	mf, ok := first(mfs, names)
	if !ok {
		return math.NaN()
	}
	s := 0.0
	for _, v := range perGroup(mf) {
		s += v
	}
	return s
}

var counter = gauge

func mean(mfs map[string]*dto.MetricFamily, names []string) float64 {
	mf, ok := first(mfs, names)
	if !ok {
		return math.NaN()
	}
	vs := perGroup(mf)
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

func histogram(mfs map[string]*dto.MetricFamily, names []string) (count, sum float64) {
	mf, ok := first(mfs, names)
	if !ok || mf.GetType() != dto.MetricType_HISTOGRAM {
		return math.NaN(), math.NaN()
	}
	for _, m := range mf.GetMetric() {
		count += float64(m.GetHistogram().GetSampleCount())
		sum += m.GetHistogram().GetSampleSum()
	}
	return count, sum
}

// llamacppITL reads llama.cpp's decode time: it exports no inter-token
// histogram, but counts the tokens its slots generated and the time they
// spent generating them (both as each request ends), whose ratio is the
// mean time between tokens, as a histogram's sum over its count is.
func llamacppITL(mfs map[string]*dto.MetricFamily, l *Load) {
	l.ITLCount = counter(mfs, []string{"llamacpp:tokens_predicted_total"})
	l.ITLSum = counter(mfs, []string{"llamacpp:tokens_predicted_seconds_total"})
}

// tritonTRTLLM reads Triton's nv_trt_llm_* gauges, whose meaning is in a label.
func tritonTRTLLM(mfs map[string]*dto.MetricFamily, l *Load) {
	byLabel := func(name, label string) map[string]float64 {
		out := map[string]float64{}
		if mf, ok := mfs[name]; ok {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label {
						out[lp.GetValue()] += value(m)
					}
				}
			}
		}
		return out
	}
	req := byLabel("nv_trt_llm_request_metrics", "request_type")
	if active, ok := req["active"]; ok {
		l.Running = req["scheduled"]
		l.Waiting = math.Max(0, active-req["scheduled"])
	}
	kv := byLabel("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type")
	if f, ok := kv["fraction"]; ok {
		l.KVUsage = f
	} else if kv["max"] > 0 {
		l.KVUsage = kv["used"] / kv["max"]
	}
}
