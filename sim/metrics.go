package sim

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metricNames are an engine's names for the simulator's /metrics.
type metricNames struct {
	prefix, running, waiting, kv, queue, ttft, itl, prompt, gen string
	labels                                                      prometheus.Labels
}

func (s *Server) names() metricNames {
	if s.style == "sglang" {
		return metricNames{"sglang:", "num_running_reqs", "num_queue_reqs", "token_usage", "queue_time_seconds",
			"time_to_first_token_seconds", "inter_token_latency_seconds", "prompt_tokens_total", "generation_tokens_total",
			prometheus.Labels{"model_name": s.profile.Model, "tp_rank": "0"}}
	}
	return metricNames{"vllm:", "num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "request_queue_time_seconds",
		"time_to_first_token_seconds", "inter_token_latency_seconds", "prompt_tokens_total", "generation_tokens_total",
		prometheus.Labels{"model_name": s.profile.Model, "engine": "0"}}
}

// locked reads an engine value under the server's lock.
func (s *Server) locked(f func(*Engine) float64) func() float64 {
	return func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return f(s.eng)
	}
}

func (s *Server) registerMetrics() {
	n := s.names()
	gauge := func(name, help string, f func(*Engine) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: n.prefix + name, Help: help, ConstLabels: n.labels}, s.locked(f))
	}
	counter := func(name, help string, f func(*Engine) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: n.prefix + name, Help: help, ConstLabels: n.labels}, s.locked(f))
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: n.prefix + name, Help: help, ConstLabels: n.labels, Buckets: buckets})
		s.reg.MustRegister(h)
		return h
	}
	s.reg.MustRegister(
		gauge(n.running, "Number of requests in model execution batches.", func(e *Engine) float64 { return float64(e.Running()) }),
		gauge(n.waiting, "Number of requests waiting to be processed.", func(e *Engine) float64 { return float64(e.Waiting()) }),
		gauge(n.kv, "KV-cache usage. 1 means 100 percent usage.", (*Engine).KVUsage),
		counter(n.prompt, "Number of prefill tokens processed.", func(*Engine) float64 { return s.finished.prompt }),
		counter(n.gen, "Number of generation tokens processed.", func(*Engine) float64 { return s.finished.gen }),
	)
	// The KV cache's size, as each engine states it: vLLM in its cache
	// config's labels (blocks of 16 tokens), SGLang as a gauge.
	kv := float64(s.profile.Params.KVCapacity)
	if s.style == "sglang" {
		s.reg.MustRegister(gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache.", func(*Engine) float64 { return kv }))
	} else {
		info := prometheus.Labels{"block_size": "16", "num_gpu_blocks": strconv.Itoa(int(kv) / 16)}
		maps.Copy(info, n.labels)
		s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: n.prefix + "cache_config_info", Help: "Information of the LLMEngine CacheConfig.", ConstLabels: info},
			func() float64 { return 1 }))
	}
	lat := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	s.queue = hist(n.queue, "Histogram of time spent in WAITING phase for request.", lat)
	s.ttft = hist(n.ttft, "Histogram of time to first token in seconds.", lat)
	s.itl = hist(n.itl, "Histogram of inter-token latency in seconds.", []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5})

	// Power in the shape of NVIDIA's DCGM exporter, so power.source: dcgm can
	// point at the simulator.
	// The GPU's name and memory are the reference report's, so that a bench
	// report's hardware card reads like the report the profile came from.
	gpus := max(1, s.profile.Params.GPUs)
	model, memMiB := "simulated", 0.0
	if r, ok := ReportOf(s.profile); ok {
		model, memMiB = r.GPUModel()+" (simulated)", r.GPUMemoryGiB*1024
	}
	for g := range gpus {
		labels := prometheus.Labels{"gpu": strconv.Itoa(g), "UUID": fmt.Sprintf("GPU-5a1e0000-0000-4000-8000-%012d", g), "Hostname": "headroom-sim", "modelName": model}
		s.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "DCGM_FI_DEV_POWER_USAGE", Help: "Power draw (in W).", ConstLabels: labels},
				s.locked(func(e *Engine) float64 { return e.Power() / float64(gpus) })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Help: "Total energy consumption since boot (in mJ).", ConstLabels: labels},
				s.locked(func(e *Engine) float64 { return e.Energy / float64(gpus) * 1000 })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "DCGM_FI_DEV_POWER_MGMT_LIMIT", Help: "Power management limit (in W).", ConstLabels: labels},
				func() float64 { return s.profile.Params.MaxWatts }),
		)
		if memMiB > 0 {
			// An engine takes most of the memory at start (vLLM's default
			// gpu_memory_utilization is 0.9) and holds it.
			s.reg.MustRegister(
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "DCGM_FI_DEV_FB_USED", Help: "Framebuffer memory used (in MiB).", ConstLabels: labels},
					func() float64 { return 0.9 * memMiB }),
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "DCGM_FI_DEV_FB_FREE", Help: "Framebuffer memory free (in MiB).", ConstLabels: labels},
					func() float64 { return 0.1 * memMiB }))
		}
	}
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "headroom_sim_info",
		Help:        "The simulator's profile and time scale: virtual seconds per wall second. All its times are virtual.",
		ConstLabels: prometheus.Labels{"profile": s.profile.Name, "report": s.profile.Report, "time_scale": strconv.FormatFloat(s.scale, 'g', -1, 64)}},
		func() float64 { return 1 }))
}
