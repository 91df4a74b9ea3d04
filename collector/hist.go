package collector

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The native buckets of the probe histograms, as client_golang makes them
// with NativeHistogramBucketFactor 1.1 and NativeHistogramMaxBucketNumber
// 160: schema 3 (a factor of 2^(1/8), about 1.09), its default zero
// threshold (2^-128), and a resolution halved whenever a histogram would
// pass 160 buckets.
const (
	nativeSchema        = 3
	nativeMaxBuckets    = 160
	nativeZeroThreshold = 2.938735877055719e-39
)

// nativeBounds are the fractions (math.Frexp's) that start each bucket
// of an octave at schema 3: 2^(j/8)/2, client_golang's own constants
// (nativeHistogramBounds[3]), so that a value on a boundary falls into the
// same bucket as there.
var nativeBounds = []float64{0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
	0.7071067811865476, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711}

// hist is one histogram of a target and scenario, counted as
// client_golang's Histogram with the probe histograms' options counts
// (classic buckets at bounds, native buckets as above) but kept in plain
// numbers: a few hundred bytes, where client_golang's with native buckets
// held two sets of counts and sync.Maps, about 3 KB once observed. Its
// owner serialises every call. Where client_golang would reset a
// histogram an hour after it passed its bucket limit, this one keeps its
// halved resolution: the probes' spread rarely comes near the limit (160
// buckets of 9% span 1 ms to 15 minutes).
//
// 55,000 of them at 1,000 targets and the five default scenarios, so the
// few values no probe has are kept small: the negative buckets (no probe
// measures a negative time or speed, but a histogram counts what it is
// given) and the created time, whose monotonic reading and location the
// exposition never reads. 176 bytes and a histSeries of 48 around it were
// 240 in two objects; embedded in its histSeries, 136 (a size class of
// 144) in one, its native buckets in a slice of their own. Each
// bucket counts in 32 bits, where 64 doubled the 17 to 28 classic counts
// of a histogram: at a lone probe a second of one target and scenario a
// bucket would wrap after 136 years; count, the total, keeps 64.
type hist struct {
	count   uint64
	sum     float64
	classic []uint32 // per bound, not cumulative; nil where there are no bounds
	zero    uint64
	pos     buckets
	neg     *buckets // nil until a value below zero's bucket
	created int64    // Unix nanoseconds
	schema  int32
}

// buckets are native buckets, ascending by index: one slice of pairs, where
// a slice of indexes beside one of counts took two allocations, two
// headers and twice append's spare room in each of the 52,000 histograms
// with native buckets at 1,000 targets.
type buckets []bucket

type bucket struct {
	key   int32
	count uint32
}

// len is how many buckets there are; none in the nil buckets.
func (b *buckets) len() int {
	if b == nil {
		return 0
	}
	return len(*b)
}

func (b *buckets) add(key int32) (created bool) {
	i, found := slices.BinarySearchFunc(*b, key, func(e bucket, k int32) int { return cmp.Compare(e.key, k) })
	if found {
		(*b)[i].count++
		return false
	}
	*b = slices.Insert(*b, i, bucket{key, 1})
	return true
}

// halve merges pairs of buckets into the buckets of one schema lower:
// bucket k of schema s lies in bucket ceil(k/2) of schema s-1. In place:
// the merged never outnumber the merging.
func (b *buckets) halve() {
	out := (*b)[:0]
	for _, e := range *b {
		e.key = (e.key + 1) >> 1
		if n := len(out); n > 0 && out[n-1].key == e.key {
			out[n-1].count += e.count
			continue
		}
		out = append(out, e)
	}
	*b = out
}

func newHist(bounds []float64, now time.Time) hist {
	h := hist{schema: nativeSchema, created: now.UnixNano()}
	if len(bounds) > 0 {
		h.classic = make([]uint32, len(bounds))
	}
	return h
}

// observe counts v; bounds are the classic bounds the histogram was made with.
func (h *hist) observe(v float64, bounds []float64) {
	if i := sort.SearchFloat64s(bounds, v); i < len(h.classic) {
		h.classic[i]++
	}
	h.sum += v
	h.count++
	if math.IsNaN(v) {
		return
	}
	var created bool
	switch key := nativeKey(v, h.schema); {
	case v > nativeZeroThreshold:
		created = h.pos.add(key)
	case v < -nativeZeroThreshold:
		if h.neg == nil {
			h.neg = &buckets{}
		}
		created = h.neg.add(key)
	default:
		h.zero++
	}
	for created && h.pos.len()+h.neg.len() > nativeMaxBuckets && h.schema > -4 {
		h.schema--
		h.pos.halve()
		if h.neg != nil {
			h.neg.halve()
		}
	}
}

// nativeKey is the index of the native bucket of v at schema, as
// client_golang computes it.
func nativeKey(v float64, schema int32) int32 {
	inf := math.IsInf(v, 0)
	if inf {
		v = math.MaxFloat64
	}
	frac, exp := math.Frexp(math.Abs(v))
	var key int
	if schema > 0 {
		// The bounds of schema 3 hold those of 2 and 1 at every 2nd and 4th.
		step := 1 << (nativeSchema - schema)
		i := sort.SearchFloat64s(nativeBounds, frac)
		key = (i+step-1)/step + (exp-1)*(len(nativeBounds)/step)
	} else {
		key = exp
		if frac == 0.5 {
			key--
		}
		offset := (1 << -schema) - 1
		key = (key + offset) >> -schema
	}
	if inf {
		key++
	}
	return int32(key)
}

// histOut is what write allocates for one histogram, in one piece but
// for the buckets and spans.
type histOut struct {
	h          dto.Histogram
	count, zc  uint64
	sum, zt    float64
	schema     int32
	created    timestamppb.Timestamp
	classic    []classicOut
	classicPtr []*dto.Bucket
}

type classicOut struct {
	b   dto.Bucket
	cum uint64
}

type spanOut struct {
	s   dto.BucketSpan
	off int32
	n   uint32
}

// write fills out as client_golang's Histogram.Write does. bounds are
// read-only and outlive out: its buckets point into them.
func (h *hist) write(out *dto.Metric, bounds []float64) {
	o := &histOut{count: h.count, zc: h.zero, sum: h.sum, zt: nativeZeroThreshold, schema: h.schema}
	created := time.Unix(0, h.created)
	o.created.Seconds, o.created.Nanos = created.Unix(), int32(created.Nanosecond())
	o.h.SampleCount, o.h.SampleSum, o.h.CreatedTimestamp = &o.count, &o.sum, &o.created
	o.h.Schema, o.h.ZeroThreshold, o.h.ZeroCount = &o.schema, &o.zt, &o.zc
	if len(h.classic) > 0 {
		o.classic = make([]classicOut, len(h.classic))
		o.classicPtr = make([]*dto.Bucket, len(h.classic))
		var cum uint64
		for i, n := range h.classic {
			cum += uint64(n)
			c := &o.classic[i]
			c.cum = cum
			c.b.CumulativeCount, c.b.UpperBound = &c.cum, &bounds[i]
			o.classicPtr[i] = &c.b
		}
		o.h.Bucket = o.classicPtr
	} else {
		o.h.Bucket = []*dto.Bucket{} // as client_golang's: empty, not nil
	}
	o.h.PositiveSpan, o.h.PositiveDelta = h.pos.spans()
	o.h.NegativeSpan, o.h.NegativeDelta = h.neg.spans()
	out.Histogram = &o.h
}

// spans encodes the buckets as client_golang's makeBuckets does: a gap of
// one or two buckets is filled with empty ones, a longer one starts a span.
func (b *buckets) spans() ([]*dto.BucketSpan, []int64) {
	if b.len() == 0 {
		return nil, nil
	}
	bs := *b
	n := 1
	for i := 1; i < len(bs); i++ {
		if bs[i].key-bs[i-1].key > 3 {
			n++
		}
	}
	spans := make([]spanOut, n)
	ptrs := make([]*dto.BucketSpan, n)
	deltas := make([]int64, 0, int(bs[len(bs)-1].key-bs[0].key)+1)
	var prev int64
	next, s := int32(0), -1
	for i, e := range bs {
		k := e.key
		if gap := k - next; i == 0 || gap > 2 {
			s++
			spans[s].off = gap
			spans[s].s.Offset, spans[s].s.Length = &spans[s].off, &spans[s].n
			ptrs[s] = &spans[s].s
		} else {
			for range gap {
				spans[s].n++
				deltas = append(deltas, -prev)
				prev = 0
			}
		}
		spans[s].n++
		c := int64(e.count)
		deltas = append(deltas, c-prev)
		prev = c
		next = k + 1
	}
	return ptrs, deltas
}
