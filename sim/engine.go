// Package sim models an LLM inference server doing continuous batching, in
// virtual time and without I/O: a waiting queue, admission bounded by the batch
// size and KV-cache capacity, chunked prefill with a per-step token budget, and
// decode steps that slow down with batch size and with the KV tokens they read.
// The HTTP server (server.go) drives the same engine against the wall clock.
package sim

import (
	"errors"
	"math"
)

// Params describe one simulated server. Times are seconds.
type Params struct {
	MaxBatch    int `json:"max_batch"`
	KVCapacity  int `json:"kv_capacity_tokens"`
	ChunkBudget int `json:"chunk_budget_tokens"` // prefill tokens per engine step
	// Step time = StepBase + DecodePerSeq*decoding^DecodeExp + DecodeLinear*decoding
	//           + DecodePerKV*(KV tokens read)
	//           + sum over prefill chunks of n*PrefillPerToken + attention(position, n).
	StepBase     float64 `json:"step_base_s"`
	DecodePerSeq float64 `json:"decode_per_seq_s"`
	DecodeExp    float64 `json:"decode_exp"`
	// DecodeLinear is the per-sequence cost that does not amortise (compute,
	// tensor-parallel all-reduce): a MoE's decode step first grows slowly with
	// the batch as its experts are all loaded, then linearly.
	DecodeLinear    float64 `json:"decode_linear_s"`
	DecodePerKV     float64 `json:"decode_per_kv_token_s"`
	PrefillPerToken float64 `json:"prefill_per_token_s"`
	PrefillAttn     float64 `json:"prefill_attn_s"`
	// PrefillAttnExp is how a prompt's attention cost grows with its length:
	// 2 (the default, when 0) is quadratic, n*PrefillAttn*(position + n/2)
	// for a chunk. Measured TTFTs can grow slower (kernels get more
	// efficient with length).
	PrefillAttnExp float64 `json:"prefill_attn_exp,omitempty"`
	// A decode batch larger than GraphBatch (vLLM's max_cudagraph_capture_size,
	// SGLang's cuda_graph_max_bs) cannot replay a captured CUDA graph and runs
	// eagerly: each of its steps costs EagerStep more, a cliff in per-user
	// decode speed at that batch size. 0 means no limit.
	GraphBatch int     `json:"graph_batch,omitempty"`
	EagerStep  float64 `json:"eager_step_s,omitempty"`
	// Overhead is per-request latency outside the GPU (HTTP, tokenizing, scheduling).
	Overhead float64 `json:"overhead_s"`
	// FrontendPerRequest is the part of that overhead one request at a time
	// goes through (an API server's single event loop): bursts queue on it.
	FrontendPerRequest float64 `json:"frontend_per_request_s"`
	// PrefillSlots is how many requests share a step's chunk budget, evenly,
	// oldest first: 1 prefills strictly first come first served (vLLM's
	// scheduler); more lets a wave of arrivals prefill side by side, so their
	// first tokens all come late.
	PrefillSlots int `json:"prefill_slots"`
	// ThroughputAccounting is not the server's: it is the ratio between the
	// system throughput a report states and the rate its own per-request
	// latencies imply (reports 000-002 state ~0.8 of it, at one request as at
	// ten), so that a replay counts throughput as the report's client did.
	ThroughputAccounting float64 `json:"throughput_accounting,omitempty"`
	// Power model: IdleWatts when idle, up to MaxWatts per GPU at full load.
	GPUs      int     `json:"gpus"`
	IdleWatts float64 `json:"idle_watts"`
	MaxWatts  float64 `json:"max_watts"`
}

// EventKind says what happened to a request at the end of a step.
type EventKind int

// Events emitted by Step.
const (
	Admitted EventKind = iota // left the queue for the batch
	FirstToken
	Token
	Finished
)

// Emit receives each event of a step: request id, kind and virtual time
// (for Admitted, the time the request waited in the queue).
type Emit func(id int64, kind EventKind, t float64)

// ErrTooLong means a request can never fit in the KV cache.
var ErrTooLong = errors.New("request exceeds the KV-cache capacity")

type chunk struct {
	s *seq
	n int
}

type seq struct {
	id          int64
	prompt, out int
	enqueue     float64
	prefilled   int
	generated   int
	kv          int
}

// Engine is the batching model. It is not safe for concurrent use.
type Engine struct {
	P       Params
	now     float64
	pending []*seq // submitted, not yet past the overhead
	waiting []*seq
	running []*seq
	kvUsed  int
	chunks  []chunk // scratch for Step
	// frontFree is when the front end is next free to take a request.
	frontFree float64

	// Cumulative counters in the manner of an engine's /metrics.
	QueueCount, QueueSum    float64
	PromptTokens, GenTokens float64
	BusyTime                float64
	Energy                  float64 // joules, all GPUs
	lastPower               float64
}

// NewEngine returns an idle engine at virtual time 0.
func NewEngine(p Params) *Engine {
	return &Engine{P: p, lastPower: p.IdleWatts * float64(max(1, p.GPUs))}
}

// Now is the engine's virtual time.
func (e *Engine) Now() float64 { return e.now }

// Running and Waiting count requests as an engine reports them.
func (e *Engine) Running() int { return len(e.running) }

// Waiting counts queued requests, those still in the overhead included.
func (e *Engine) Waiting() int { return len(e.waiting) + len(e.pending) }

// KVUsage is the share of KV-cache tokens reserved.
func (e *Engine) KVUsage() float64 { return float64(e.kvUsed) / float64(e.P.KVCapacity) }

// Power is the draw of all GPUs during the last step, in watts.
func (e *Engine) Power() float64 { return e.lastPower }

// Submit adds a request at the current virtual time.
func (e *Engine) Submit(id int64, prompt, output int) error {
	return e.SubmitAt(e.now, id, prompt, output)
}

// SubmitAt adds a request that arrived at virtual time at. The front end
// takes it from its arrival, not from the engine's clock, which a server
// that computes each step at its start (Server.Run) has already moved to
// the step's end, and which an engine waiting for a request's overhead
// has left behind. So a request handed in as a step ends meets the same
// engine whether the next step was computed before it or after: with
// clients and the stepping loop woken at one virtual instant, the order
// they run in is the scheduler's, and the run would not repeat.
func (e *Engine) SubmitAt(at float64, id int64, prompt, output int) error {
	if prompt+output > e.P.KVCapacity {
		return ErrTooLong
	}
	e.frontFree = math.Max(e.frontFree, at) + e.P.FrontendPerRequest
	e.pending = append(e.pending, &seq{id: id, prompt: prompt, out: output, enqueue: e.frontFree + e.P.Overhead, kv: prompt + output})
	return nil
}

// Cancel drops a request wherever it is.
func (e *Engine) Cancel(id int64) {
	drop := func(l []*seq) []*seq {
		for i, s := range l {
			if s.id == id {
				return append(l[:i], l[i+1:]...)
			}
		}
		return l
	}
	e.pending = drop(e.pending)
	e.waiting = drop(e.waiting)
	for i, s := range e.running {
		if s.id == id {
			e.kvUsed -= s.kv
			e.running = append(e.running[:i], e.running[i+1:]...)
			return
		}
	}
}

// Idle reports whether nothing is submitted.
func (e *Engine) Idle() bool { return len(e.pending)+len(e.waiting)+len(e.running) == 0 }

// NextWake is when the next step can start: now if there is work, else the
// time the first pending request clears its overhead, +Inf when idle.
func (e *Engine) NextWake() float64 {
	if len(e.waiting)+len(e.running) > 0 {
		return e.now
	}
	t := math.Inf(1)
	for _, s := range e.pending {
		t = math.Min(t, s.enqueue)
	}
	return t
}

// AdvanceTo moves an idle engine's clock forward (never backwards).
func (e *Engine) AdvanceTo(t float64) {
	if t > e.now {
		e.Energy += e.P.IdleWatts * float64(max(1, e.P.GPUs)) * (t - e.now)
		e.lastPower = e.P.IdleWatts * float64(max(1, e.P.GPUs))
		e.now = t
	}
}

// attnRef is the prompt length PrefillAttnExp's power is taken relative to,
// so that PrefillAttn keeps about the same scale whatever the exponent.
const attnRef = 32768

// attention is the cost of prefilling n tokens from position on: a whole
// prompt of L tokens costs PrefillAttn*attnRef²/k*(L/attnRef)^k, the
// quadratic's PrefillAttn*L²/2 when k is 2.
func (p Params) attention(position, n int) float64 {
	k := p.PrefillAttnExp
	if k == 0 || k == 2 {
		return float64(n) * p.PrefillAttn * (float64(position) + float64(n)/2)
	}
	a, b := float64(position)/attnRef, float64(position+n)/attnRef
	return p.PrefillAttn * attnRef * attnRef * (math.Pow(b, k) - math.Pow(a, k)) / k
}

// Step runs one engine iteration and returns its duration; 0 when there was
// nothing to run (call NextWake and AdvanceTo).
func (e *Engine) Step(emit Emit) float64 {
	e.release()
	e.admit(emit)
	var decoding, kvRead int
	prefill := 0.0
	budget := e.P.ChunkBudget
	slots := max(1, e.P.PrefillSlots)
	np := 0
	for _, s := range e.running {
		if s.prefilled < s.prompt {
			np++
		}
	}
	share := max(1, budget/max(1, min(np, slots)))
	chunks := e.chunks[:0]
	for _, s := range e.running {
		if s.prefilled == s.prompt {
			decoding++
			kvRead += s.prompt + s.generated
			continue
		}
		if budget == 0 || len(chunks) == slots {
			continue
		}
		n := min(s.prompt-s.prefilled, budget, share)
		budget -= n
		prefill += float64(n)*e.P.PrefillPerToken + e.P.attention(s.prefilled, n)
		chunks = append(chunks, chunk{s, n})
	}
	e.chunks = chunks
	if decoding == 0 && len(chunks) == 0 {
		return 0
	}
	dt := e.P.StepBase + prefill
	if decoding > 0 {
		dt += e.P.DecodePerSeq*math.Pow(float64(decoding), e.P.DecodeExp) + e.P.DecodeLinear*float64(decoding) + e.P.DecodePerKV*float64(kvRead)
		if e.P.GraphBatch > 0 && decoding > e.P.GraphBatch {
			dt += e.P.EagerStep
		}
	}
	e.now += dt
	e.BusyTime += dt
	// Power follows how much of the GPU the step used: prefill is compute-bound,
	// a large decode batch nearly so.
	util := math.Min(1, prefill/dt+float64(decoding)/32)
	e.lastPower = float64(max(1, e.P.GPUs)) * (e.P.IdleWatts + (e.P.MaxWatts-e.P.IdleWatts)*(0.35+0.65*util))
	e.Energy += e.lastPower * dt

	kept := e.running[:0]
	for _, s := range e.running {
		done := false
		if s.prefilled == s.prompt {
			s.generated++
			e.GenTokens++
			if emit != nil {
				emit(s.id, Token, e.now)
			}
			done = s.generated >= s.out
		}
		if done {
			e.kvUsed -= s.kv
			if emit != nil {
				emit(s.id, Finished, e.now)
			}
			continue
		}
		kept = append(kept, s)
	}
	e.running = kept
	for _, c := range chunks {
		c.s.prefilled += c.n
		e.PromptTokens += float64(c.n)
		if c.s.prefilled == c.s.prompt {
			c.s.generated = 1
			e.GenTokens++
			if emit != nil {
				emit(c.s.id, FirstToken, e.now)
			}
			if c.s.out <= 1 {
				e.finish(c.s, emit)
			}
		}
	}
	return dt
}

func (e *Engine) finish(s *seq, emit Emit) {
	for i, r := range e.running {
		if r == s {
			e.running = append(e.running[:i], e.running[i+1:]...)
			e.kvUsed -= s.kv
			break
		}
	}
	if emit != nil {
		emit(s.id, Finished, e.now)
	}
}

// release moves pending requests whose overhead has passed into the queue.
func (e *Engine) release() {
	kept := e.pending[:0]
	for _, s := range e.pending {
		if s.enqueue <= e.now {
			e.waiting = append(e.waiting, s)
		} else {
			kept = append(kept, s)
		}
	}
	e.pending = kept
}

// admit moves queued requests into the batch, first come first served, while
// the batch and the KV cache have room for each one's whole context.
func (e *Engine) admit(emit Emit) {
	for len(e.waiting) > 0 && len(e.running) < e.P.MaxBatch && e.kvUsed+e.waiting[0].kv <= e.P.KVCapacity {
		s := e.waiting[0]
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		e.kvUsed += s.kv
		e.QueueCount++
		e.QueueSum += e.now - s.enqueue
		if emit != nil {
			emit(s.id, Admitted, e.now-s.enqueue)
		}
	}
}
