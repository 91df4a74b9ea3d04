package capacity

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

func sloShort(name string) string {
	switch name {
	case "ttft_seconds":
		return "TTFT"
	case "e2e_seconds":
		return "E2E"
	case "itl_seconds":
		return "ITL"
	}
	return "decode"
}

// fitted is what a use case's laws say of its capacity, before the load
// now: all of it rests on the window's points alone, so it is kept while
// they do not change (Memo). It keeps what a reading at another load needs
// of the laws, their coefficients, and not the fits they came from: a
// fit's residuals and covariances are per observation or per pair of
// terms, and a daemon keeps a fitted for every target and use case.
type fitted struct {
	laws twin // the use case's shape, the KV cache and the laws
	// ttftSE and itlSE are the laws' coefficients' standard errors
	// (standardErrors), for Estimate.Model.
	ttftSE       [ttftKV + 1]float64
	itlSE        [itlCols]float64
	slos         []SLO // Capacity, Lower, Upper, Curve and Why of each
	lower, upper float64
	why          string
	// aim is the laws' crossing, placed or not, reach the most requests
	// together the binding laws' data hold: where calibration goes next.
	aim, reach float64
	// bound: the data cannot place the capacity (only lower); sloped:
	// every law has a slope; decodeShort: no capacity for want of decode
	// data, where bursts were sent (a decode threshold binds past the ITL
	// law's reach, which is short of the TTFT law's, or the ITL law has no
	// slope where the TTFT law has one).
	bound, sloped, decodeShort bool
	capacity                   float64

	mu       sync.Mutex
	readings [readings]keyedReading // the last few, newest at next-1
	next     int
}

// fit fits the laws to os and runs them in the twin (twin.go) with output
// tokens per request: the capacity, its bounds, each SLO's own.
func fit(slos []SLO, os []obs, stat string, shape twin, pr Prior) *fitted {
	ttft := ttftPart(os, pr)
	itl := itlPart(prefillShares(os, ttft, shape.input), pr, ttft.prefill())
	shape.inSteps = decoders(&ttft, itl)
	shape.saturate = itl.saturate
	if itl.ok && !(itl.fit.beta[0] > 0) {
		// A decode step at a batch of one at or below zero: the line
		// holds only over the batches its data decoded in (twin.least).
		shape.least = itl.least
	}
	if stat != "mean" && stat != "" {
		// A percentile is the mean's law shifted by the residuals' own
		// percentile: the noise around the law, not the law, sets it.
		for _, p := range []*part{&ttft, &itl} {
			if p.ok {
				p.fit.beta = slices.Clone(p.fit.beta)
				p.fit.beta[0] += Statistic(p.fit.resid, stat)
			}
		}
	}
	// A lent bend was measured as far as the use case that lent it
	// measured it, and past that the estimate takes it as its tangent
	// there: a decode step grows linearly with its batch on either side of
	// its turn to compute-bound (the roofline), and past every batch
	// measured no probe has said how much more steeply. itl-at-arrival/2's
	// idle chatbot (a step growing as the requests at arrival to the power
	// 1.6, its own bursts' batches short of the other use cases') read
	// 101.8 against 121.3 with the lent square carried to its crossing,
	// 112.0 with its tangent. A use case's own bend it keeps as fitted:
	// measured up to near its crossing, the suite's power laws bend on past
	// any tangent (taken for every bend, 24 fewer within; the changelog).
	// The pessimistic bound keeps the square.
	est := shape
	if itl.lentTo > 0 { // set only where the law keeps a lent bend
		est.straight = math.Max(itl.lentTo-1, 1)
	}
	f := &fitted{laws: est.with(ttft.fit.beta, itl.fit.beta), slos: slices.Clone(slos), capacity: math.NaN(), sloped: true,
		aim: math.Inf(1), reach: math.Inf(1)}
	standardErrors(f.ttftSE[:], ttft.fit, ttft.ok)
	standardErrors(f.itlSE[:], itl.fit, itl.ok)
	base := &cells{tw: f.laws}
	type sloFit struct {
		est, lo, hi, raw    float64
		placed, decodeShort bool
	}
	fits := make([]sloFit, len(slos))
	binding := -1
	var whys []string
	f.lower, f.upper = math.Inf(1), math.Inf(1)
	placedUpper := math.Inf(1) // the least upper bound of the thresholds placed
	// The optimistic bound takes a bend no further than the data measured
	// it: latency grows at least linearly with the batch (a step reads
	// every sequence), but how much more steeply past the data no probe
	// has said, so past the batches it was measured at the bend goes on as
	// its tangent there, also where δa's requests at arrival reach further.
	optimistic := shape
	if len(itl.fit.used) > curved && itl.fit.used[curved] { // no ITL fit at all: no bend
		optimistic.straight = math.Max(itl.batches-1, 1)
	}
	// Nor does it take a step's levelling (δe·ln b) further than the
	// batches it was measured at: a mixture of experts reads at most all
	// of its experts, E·(1 − (1 − k/E)^b) of them for a batch of b, and
	// past the batches measured they may all be read already, where ln b
	// goes on rising. moe-decode/3's document (64 experts, 8 a token,
	// nearly all read by 16 sequences) read 23.1 [20.8, 26.2] on an idle
	// server against 46.6.
	if len(itl.fit.used) > experts && itl.fit.used[experts] {
		optimistic.level = math.Max(itl.batches, 1)
		// Past them the experts may all be read already, and a step
		// grows by each sequence's own reads alone: at least as the use
		// case that measured the levelling furthest says (levelled).
		if p := pr.Past; p.Batches > itl.batches && p.Value < itl.fit.beta[1] {
			optimistic.past = p.Value
		}
	}
	// The pessimistic bound takes it no further either, the other way: a
	// step that levels off lies below its tangent, so past the batches
	// measured it grows at least as steeply as where the data end, where
	// ln b would flatten it on (restart/moe-decode/4 under load: 8
	// experts, 2 a token, all read by 16 sequences, a step growing
	// 0.45 ms a sequence past them; its chatbot's lower bound read 130.4
	// against 125.6, now 122.7). It cannot mend ln b's own misfit to such
	// a step, whose δb it reads low: on that law idle, from bursts to 64,
	// the lower bound stood above the truth in most draws with it or
	// without (the changelog).
	pessimistic := shape
	if len(itl.fit.used) > experts && itl.fit.used[experts] {
		pessimistic.tangent = math.Max(itl.batches, 1)
	}
	slower, quicker := itl.fit, itl.fit
	if itl.ok {
		slower, quicker = jointly(itl.fit, 1, Reach*itl.reach, itl.saturate), jointly(itl.fit, -1, Reach*itl.reach, itl.saturate)
	}
	for i := range f.slos {
		s := &f.slos[i]
		s.Capacity, s.Lower, s.Upper = math.NaN(), math.NaN(), math.NaN()
		parts := []part{itl}
		switch s.Name {
		case "ttft_seconds":
			parts = []part{ttft}
		case "e2e_seconds":
			parts = []part{ttft, itl}
		}
		reach := math.Inf(1)
		sloped := true
		for _, p := range parts {
			reach = math.Min(reach, p.reach)
			sloped = sloped && p.slope()
		}
		short := sloShort(s.Name)
		if !sloped {
			whys = append(whys, short+": no requests sent together at two levels yet")
			f.sloped = false
			// Bursts were sent, but their probes never decoded together.
			f.decodeShort = f.decodeShort || s.Name != "ttft_seconds" && ttft.slope() && !itl.slope()
			continue
		}
		// The search goes as far as the data place a threshold, and the
		// bounds' horizon times further: past that, nothing bounds it.
		far := int(math.Ceil(Reach * reach))
		sf := sloFit{est: base.limit(*s, far)}
		sf.placed = sf.est <= Reach*reach
		at := math.Min(sf.est, float64(far))
		lo := shifted(pessimistic, ttft.fit, slower, 1, 1).limit(*s, horizon*far)
		if itl.wide != nil && s.Name != "ttft_seconds" {
			lnb := pessimistic // its levelling, if any, is ln b (part.wide)
			lnb.saturate = 0
			lo = math.Min(lo, shifted(lnb, ttft.fit, *itl.wide, 1, 1).limit(*s, horizon*far))
		}
		hi := shifted(optimistic, ttft.fit, quicker, -1, -1).limit(*s, horizon*far)
		// A closed loop is not monotone in every cost: a quicker decode
		// brings the second round back while the first still queues for
		// prefill, so a slower decode beside a quicker prefill can be the
		// band's best case. The bounds are the extremes of the estimate
		// and the four corners where each law is at one edge, and at least
		// the whole requests around the estimate: the protocol sends a
		// whole number, and the fraction between two levels is the
		// search's interpolation, which no latency measures (a law need
		// not be straight between them), so a band narrower than that
		// step would claim what nothing measured.
		quickPrefill := shifted(pessimistic, ttft.fit, slower, -1, 1).limit(*s, horizon*far)
		quickDecode := shifted(optimistic, ttft.fit, quicker, 1, -1).limit(*s, horizon*far)
		sf.lo = min(lo, hi, quickPrefill, quickDecode, math.Floor(sf.est))
		sf.hi = max(lo, hi, quickPrefill, quickDecode, math.Ceil(sf.est))
		if sf.hi > float64(horizon*far) {
			sf.hi = math.Inf(1)
		}
		f.aim = math.Min(f.aim, sf.est)
		f.reach = math.Min(f.reach, reach)
		sf.raw = sf.est
		if !sf.placed {
			sf.est = math.NaN()
			sf.lo = math.Min(sf.lo, Reach*reach)
			sf.decodeShort = s.Name != "ttft_seconds" && itl.reach < ttft.reach
			whys = append(whys, fmt.Sprintf("%s threshold not reached; requests together up to %.0f", short, reach))
		}
		fits[i] = sf
		s.Capacity, s.Lower, s.Upper = sf.est, sf.lo, sf.hi
		if sf.placed {
			placedUpper = math.Min(placedUpper, sf.hi)
		} else {
			// Past the data's reach the laws are not trusted to place the
			// threshold, so nothing they say there bounds it from above
			// either: moe-decode/3's short chatbot under load, its requests
			// together up to 30, read at least 56.4 with the optimistic
			// laws' crossing, 64.1, for an upper bound, against a truth of
			// 109.5. (A placed capacity's upper still takes it, as the
			// least a threshold's band allows.)
			s.Upper = math.Inf(1)
		}
		s.Curve = curve(base, s.Name, math.Max(2*reach, math.Min(at*1.2, 4*reach)))
		f.lower, f.upper = math.Min(f.lower, sf.lo), math.Min(f.upper, sf.hi)
		// The binding threshold is the one whose law crosses first, placed
		// or not: a law the data do not reach yet still says, by its line,
		// that it breaks after one they do.
		if binding < 0 || sf.raw < fits[binding].raw {
			binding = i
		}
	}
	f.why = strings.Join(whys, "; ")
	switch {
	case !f.sloped || binding < 0:
	case !fits[binding].placed:
		// The first crossing lies past the data's reach: a bound.
		f.bound, f.decodeShort, f.upper = true, fits[binding].decodeShort, placedUpper
		f.why = fmt.Sprintf("at least %.1f: %s", f.lower, f.why)
	case math.IsInf(f.upper, 1):
		// The band reaches to no bound at all: the data place no
		// threshold, wherever the laws' line crosses (a law of one or two
		// observations, sloped by the other use cases' prior and noise).
		f.bound = true
		f.why = fmt.Sprintf("at least %.1f: the laws' bands place no threshold (up to no bound)", f.lower)
	default:
		f.capacity, f.why = fits[binding].est, ""
	}
	return f
}

// apply puts a fit into e with the production now.
func (f *fitted) apply(e *Estimate, now Production) {
	f.place(e)
	if f.reads(now) {
		f.read(e, now)
	}
}

// reads says whether the production now moves what the fit puts into an
// estimate: the margins, the free requests and the ratio of a placed
// capacity.
func (f *fitted) reads(now Production) bool {
	return f.sloped && !f.bound && !math.IsNaN(now.InFlight)
}

// place puts into e what the fit says whatever the production.
func (f *fitted) place(e *Estimate) {
	for i := range e.SLOs {
		s, g := &e.SLOs[i], f.slos[i]
		s.Capacity, s.Lower, s.Upper, s.Curve = g.Capacity, g.Lower, g.Upper, g.Curve
	}
	e.Why = f.why
	if f.sloped {
		e.Aim, e.Reach = f.aim, f.reach
	}
	switch {
	case !f.sloped:
		// A law the data cannot slope yet: all that is known is whether
		// one request alone meets every threshold.
		e.Bound, e.Lower, e.Upper = "lower", e.alone(), math.Inf(1)
		if math.IsNaN(e.Lower) {
			e.Bound = ""
		}
		return
	case f.bound:
		e.Bound, e.Lower, e.Upper = "lower", f.lower, f.upper
		return
	}
	e.Capacity, e.Lower, e.Upper = f.capacity, f.lower, f.upper
}

// read puts into e what the fit says with the production now in it (reads).
func (f *fitted) read(e *Estimate, now Production) {
	// The margin, the free requests and the ratio are one reading of the
	// same twin with the production now in it, so that they never
	// disagree: the margin is what one more request would meet, free how
	// many more fit.
	r := f.at(now, e.SLOs)
	free := r.free
	e.Margin = math.Inf(1)
	for i := range e.SLOs {
		e.SLOs[i].Margin = r.margins[i]
		e.Margin = math.Min(e.Margin, r.margins[i])
	}
	if e.Margin < 0 || free < 1 {
		free = 0
	}
	e.Free = math.Min(free, e.Capacity)
	e.Ratio = 0
	if e.Capacity > 0 {
		e.Ratio = e.Free / e.Capacity
	}
}

// reading is what the twin says at one load: each SLO's margin for one
// more request, and how many more fit.
type reading struct {
	margins []float64
	free    float64
}

// keyedReading is a reading and the load it was read at (fitted.at's key);
// margins nil: none yet.
type keyedReading struct {
	key [3]float64
	reading
}

// at reads the twin with the production now, to a quarter of a request
// (the engine's own readings are means over a scrape) and a thousand KV
// tokens, keeping the last few readings: the daemon asks at every scrape,
// page and calibration decision.
func (f *fitted) at(now Production, slos []SLO) reading {
	w := 0.0
	if now.Waiting > 0 {
		w = math.Round(now.Waiting*4) / 4
	}
	running := math.Max(math.Round(now.InFlight*4)/4-w, 0)
	beyond := 0.0
	if now.KV > 0 {
		beyond = math.Round(now.KV/1000 - running*f.laws.held/1000)
	}
	key := [3]float64{running, w, beyond}
	f.mu.Lock()
	for _, k := range f.readings {
		if k.margins != nil && k.key == key {
			f.mu.Unlock()
			return k.reading
		}
	}
	f.mu.Unlock()
	tw := f.laws
	tw.running, tw.waiting, tw.beyond = running, w, beyond
	cs := &cells{tw: tw}
	one := cs.at(1)
	r := reading{margins: make([]float64, 0, len(slos)), free: math.Inf(1)}
	for _, s := range slos {
		r.margins = append(r.margins, margin(s.Name, one.value(s.Name), s.Threshold))
		r.free = math.Min(r.free, cs.limit(s, int(math.Ceil(f.capacity))+1))
	}
	f.mu.Lock()
	f.readings[f.next] = keyedReading{key: key, reading: r}
	f.next = (f.next + 1) % readings
	f.mu.Unlock()
	return r
}

// readings is how many loads' readings a fit keeps: the daemon's asks
// between two of production's readings share one load, and a load that
// wanders keeps few in common with the last minutes'. A map of 64 per
// fit held about 9 KB more under a load that wandered
// (BenchmarkMemoRetained): 45 MB for a fleet of 5,000 use cases, to save
// a twin's run per scrape.
const readings = 4

// shifted is the twin with every coefficient of each law at one edge of
// its 95% band (the law's own quantile of Student's t times its standard
// error, as its scale is estimated from its few observations): side +1 the
// pessimistic edge (every cost higher), -1 the optimistic; TTFT's law at
// prefill's side, ITL's at decode's. Each coefficient at its own band's edge
// together covers at least the laws' joint band at every load; fit reads
// the four corners, as a closed loop is not monotone in every cost. No
// coefficient is known to better than the latencies it is fitted from
// (resolution): where hundreds of probes make a standard error smaller,
// a band of a fraction of a percent would claim what no probe measures.
func shifted(shape twin, ttft, itl linearFit, prefill, decode float64) *cells {
	return &cells{tw: shape.with(shift(ttft, prefill), shift(itl, decode))}
}

// jointly moves the ITL law's slope δb and its ln b term δe together to
// the edge of their joint 95% band where a step at batch b is slowest
// (side 1) or quickest (−1), and holds them there for shift: the two
// columns rise together with the batch, so their estimates trade against
// each other, and each at the edge of its own band (shift's corners) is
// a step the data exclude (report 000's chatbot on an idle simulator:
// bounds of 2.6 and 74.0 around 7.0). At b, the far end of what the law
// is trusted to (Reach times its data), the band is widest. For a
// prediction r·β the edge is β ± t·Σr/√(rᵀΣr).
func jointly(f linearFit, side, b, saturate float64) linearFit {
	if !f.used[1] || !f.used[experts] || !(b > 1) {
		return f
	}
	r := [2]float64{b - 1, levelColumn(b, saturate)}
	c := [2][2]float64{{f.cov[1][1], f.cov[1][experts]}, {f.cov[experts][1], f.cov[experts][experts]}}
	sr := [2]float64{c[0][0]*r[0] + c[0][1]*r[1], c[1][0]*r[0] + c[1][1]*r[1]}
	v := r[0]*sr[0] + r[1]*sr[1]
	if !(v > 0) || math.IsInf(v, 0) {
		return f
	}
	k := side * f.quantile() / math.Sqrt(v)
	out := f
	out.beta = slices.Clone(f.beta)
	out.cov = make([][]float64, len(f.cov))
	for i, row := range f.cov {
		out.cov[i] = slices.Clone(row)
	}
	for j, col := range [2]int{1, experts} {
		out.beta[col] += k * sr[j]
		for i := range out.cov {
			out.cov[i][col], out.cov[col][i] = 0, 0
		}
	}
	return out
}

func shift(f linearFit, side float64) []float64 {
	out := slices.Clone(f.beta)
	for a := range out {
		if !f.used[a] {
			continue
		}
		if se := math.Max(math.Sqrt(math.Max(f.cov[a][a], 0)), resolution*math.Abs(out[a])); se > 0 {
			out[a] += side * f.quantile() * se
		}
		if a > 0 || math.IsNaN(out[a]) {
			out[a] = math.Max(out[a], 0)
		}
	}
	return out
}

// alone is the capacity's lower bound before any law can be sloped: 1 when
// the lone probes' statistic meets every threshold, 0 when one does not;
// NaN without probes.
func (e *Estimate) alone() float64 {
	out := 1.0
	for _, s := range e.SLOs {
		switch {
		case math.IsNaN(s.Value):
			return math.NaN()
		case s.Margin < 0:
			out = 0
		}
	}
	return out
}

// curve samples the twin for one SLO at n = 1 to upTo, for the status
// page's chart.
func curve(cs *cells, name string, upTo float64) Curve {
	top := int(math.Min(math.Max(math.Ceil(upTo), 2), 4096))
	c := make(Curve, 0, 9) // kept with the fit: no room to grow into
	last := 0
	for i := range 9 {
		n := 1 + (top-1)*i/8
		if n == last {
			continue
		}
		last = n
		c = append(c, Knot{Load: float64(n), Value: cs.at(n).value(name)})
	}
	return c
}
