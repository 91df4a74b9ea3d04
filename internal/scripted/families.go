package scripted

import (
	"math"
	"math/rand/v2"
)

// SuiteSeeds is how many laws of each family the generalization suite
// draws (seeds 1 to SuiteSeeds). Each is watched for an hour of virtual
// time, idle and loaded: the count is what 2 cores run in a few minutes.
const SuiteSeeds = 5

// Family is one kind of law of the generalization suite, its parameters
// drawn per seed from wide ranges.
type Family struct {
	Name string
	// shape draws the family's own parameters over the base every law has.
	shape func(d draws, l Law) Law
}

// Draw draws the family's law for a seed.
func (f Family) Draw(seed uint64) Law {
	d := newDraws(f.Name, seed)
	return f.shape(d, d.base(f.Name, seed))
}

// Families are the suite's laws (issue 36). Their ranges are drawn so
// that, for the default use cases, true capacities spread over roughly 1 to
// 100 requests and different thresholds bind for different seeds
// (TestTruthDistribution prints them).
func Families() []Family {
	return []Family{
		{"linear", drawLinear},
		{"decode-bound", drawDecodeBound},
		{"kv-cliff", drawKV},
		{"chunked-prefill", drawChunked},
		{"fcfs-prefill", drawFCFS},
		{"itl-at-arrival", func(d draws, l Law) Law { return drawPower(d, l, true) }},
		{"itl-during-decode", func(d draws, l Law) Law { return drawPower(d, l, false) }},
		{"noise", drawNoise},
		{"restart", drawRestart},
		{"moe-decode", drawMoE},
	}
}

// draws is a family's generator for a seed: the family's name goes into
// the stream, so that families drawn at one seed differ.
type draws struct{ *rand.Rand }

func newDraws(family string, seed uint64) draws {
	h := uint64(14695981039346656037) // FNV-1a of the name
	for i := 0; i < len(family); i++ {
		h = (h ^ uint64(family[i])) * 1099511628211
	}
	return draws{rand.New(rand.NewPCG(seed, h))}
}

func (d draws) uniform(lo, hi float64) float64 { return lo + (hi-lo)*d.Float64() }

func (d draws) logUniform(lo, hi float64) float64 { return lo * math.Pow(hi/lo, d.Float64()) }

// base draws what every law has: a lone request's prefill (the overhead of
// scheduling and sampling, a prefill speed of 15K-80K tokens/s, and an
// attention term worth up to 30% of the linear work at 64K) and its
// interval between tokens (5-12 ms, plus up to 0.1 ms per 1K tokens of
// context read). A 96K prompt then takes 1.3 to 10 s alone, and a lone
// request decodes at 25 to 190 tokens/s: every default use case fits one
// request on most draws, and the slopes of each family decide how many.
func (d draws) base(family string, seed uint64) Law {
	p := 1 / d.logUniform(15000, 80000)
	return Law{Family: family, Seed: seed,
		Overhead: d.uniform(0.02, 0.25), PrefillPerToken: p, PrefillQuad: d.uniform(0, 0.3) * p / 65536,
		ITLBase: d.uniform(0.005, 0.012), ITLPerKToken: d.logUniform(0.01e-3, 0.1e-3), ITLPower: 1}
}

// linear: TTFT and ITL each grow by a fixed amount per other request in
// flight at arrival.
func drawLinear(d draws, l Law) Law {
	l.TTFTPerOther = d.logUniform(0.05, 0.8)
	l.ITLSlope = d.logUniform(0.2e-3, 4e-3)
	l.ITLAtArrival = true
	return l
}

// decode-bound: each token's interval grows steeply with the requests
// running at that moment; TTFT barely with those in flight at arrival.
func drawDecodeBound(d draws, l Law) Law {
	l.TTFTPerOther = d.logUniform(0.002, 0.02)
	l.ITLSlope = d.logUniform(0.7e-3, 6e-3)
	l.ITLHistogram = true
	return l
}

// kv-cliff: a KV cache of 110K to 1.2M tokens; prefills run side by side at
// their lone speed and the decode slows mildly with the requests running,
// so latency is nearly flat until the cache is full, and then a request
// waits in the queue for one to end: a cliff.
func drawKV(d draws, l Law) Law {
	l.KVTokens, l.BlockSize = int(d.logUniform(110e3, 1.2e6))/16*16, 16
	l.ITLSlope = d.logUniform(0.1e-3, 1e-3)
	l.ITLHistogram = true
	return l
}

// chunked-prefill: engine steps of 4-10 ms plus 0.2-2 ms per decoding
// sequence (and its context's reads), each prefilling at most a chunk of
// 512 to 8192 prompt tokens.
func drawChunked(d draws, l Law) Law {
	l.Chunk = 512 << d.IntN(5)
	l.StepBase, l.StepPerSeq = d.uniform(0.004, 0.010), d.logUniform(0.2e-3, 2e-3)
	l.ITLHistogram = true
	return l
}

// fcfs-prefill: one prefill at a time, first come first served, the rest
// waiting; decode slows mildly with the requests running.
func drawFCFS(d draws, l Law) Law {
	l.SerialPrefill = true
	l.ITLSlope = d.logUniform(0.1e-3, 2e-3)
	l.ITLHistogram = true
	return l
}

// moe-decode: a mixture of experts (every reference report's model is
// one): 8 experts with 2 per token, or 64 to 256 with 8, the active
// experts' weights 15% to 40% of a lone step, so that a batch that reads
// every expert steps (Experts/Active − 1) times that share slower, most of
// it within the first few sequences; past that, 0.3 to 3 ms per sequence
// running (its KV reads: report 004's MoE stepped 0.26 ms slower per 4K
// sequence and 2.3 ms per 32K one). Prefills run side by side, TTFT
// growing mildly with the requests in flight at arrival.
func drawMoE(d draws, l Law) Law {
	l.Experts, l.Active = 8, 2
	if d.IntN(4) > 0 {
		l.Experts, l.Active = 64<<d.IntN(3), 8
	}
	l.ExpertRead = d.uniform(0.15, 0.4) * l.ITLBase / float64(l.Active)
	l.ITLSlope = d.logUniform(0.3e-3, 3e-3)
	l.TTFTPerOther = d.logUniform(0.005, 0.05)
	l.ITLHistogram = true
	return l
}

// itl-at-arrival and itl-during-decode: the interval between tokens grows
// as a power (1.3 to 2.2) of the other requests, reaching twice the lone
// interval at 3 to 30 of them: counted at the request's arrival and fixed
// for its life, or counted anew at each moment of its decode. TTFT grows
// mildly with the requests in flight at arrival.
func drawPower(d draws, l Law, atArrival bool) Law {
	l.TTFTPerOther = d.logUniform(0.005, 0.05)
	l.ITLPower = d.uniform(1.3, 2.2)
	l.ITLSlope = l.ITLBase / math.Pow(d.logUniform(3, 30), l.ITLPower)
	l.ITLAtArrival = atArrival
	l.ITLHistogram = !atArrival
	return l
}

// noise: the linear law with lognormal noise of sigma 0.1-0.3 on each
// request's prefill and interval, and 2% of requests 5-10x slower.
func drawNoise(d draws, l Law) Law {
	l = drawLinear(d, l)
	l.Noise, l.OutlierP, l.OutlierMin, l.OutlierMax = d.uniform(0.1, 0.3), 0.02, 5, 10
	return l
}

// restart: one of the other laws (by seed), restarting between 20 and 40
// minutes in, down for 10 to 60 s.
func drawRestart(d draws, l Law) Law {
	var fs []Family
	for _, f := range Families() {
		if f.Name != "restart" {
			fs = append(fs, f)
		}
	}
	f := fs[d.IntN(len(fs))]
	l = f.shape(d, l)
	l.Family = "restart/" + f.Name
	l.RestartAt, l.Downtime = d.uniform(20*60, 40*60), d.uniform(10, 60)
	return l
}

// DrawProduction draws production for a seed: up to 3 to 12 users, at
// least none to a third of them, over a sine of 30 to 90 minutes, thinking
// 1 to 10 s between requests.
func DrawProduction(seed uint64) *Production {
	d := newDraws("production", seed)
	high := 3 + d.IntN(10)
	return &Production{Low: d.IntN(high/3 + 1), High: high,
		Period: d.uniform(30*60, 90*60), Phase: d.uniform(0, 2*math.Pi), Think: d.uniform(1, 10)}
}
