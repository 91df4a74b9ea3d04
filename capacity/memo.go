package capacity

import (
	"crypto/sha256"
	"fmt"
	"sync"
)

// Memo keeps each use case's fit between evaluations of the same points:
// the twin's searches are most of an estimate's cost, and the points change
// only when a probe lands, while the daemon evaluates on every scrape, page
// and calibration decision. The nil Memo keeps nothing.
type Memo struct {
	mu   sync.Mutex
	fits map[[3]string]memoFit
}

// memoFit is a fit and the digest of what it rests on: the description
// runs to hundreds of bytes (the use case's thresholds, prior and shape),
// kept for each of a fleet's 5,000 use cases; its SHA-256 is 32, and two
// descriptions that differ do not share one.
type memoFit struct {
	key [sha256.Size]byte
	fit *fitted
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{fits: map[[3]string]memoFit{}} }

// Forget drops a target's fits.
func (m *Memo) Forget(target string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.fits {
		if k[0] == target {
			delete(m.fits, k)
		}
	}
}

// fit is fit's result for these points, from the memo when nothing it
// rests on changed: the points (a window only gains points at its end and
// loses them at its start), the use case and its prior.
func (m *Memo) fit(id [3]string, u UseCase, points []Point, os []obs) *fitted {
	shape := u.shape()
	if m == nil {
		return fit(u.SLOs(), os, u.Statistic, shape, u.Prior)
	}
	first, last := points[0], points[len(points)-1]
	key := sha256.Sum256(fmt.Appendf(nil, "%d %d %d %v %v %v %v %v %v", len(points), first.Time.UnixNano(), last.Time.UnixNano(), last.TTFT, u.SLOs(), u.Statistic, u.Prior, u.Cost, shape))
	m.mu.Lock()
	f, ok := m.fits[id]
	m.mu.Unlock()
	if ok && f.key == key {
		return f.fit
	}
	ft := fit(u.SLOs(), os, u.Statistic, shape, u.Prior)
	m.mu.Lock()
	m.fits[id] = memoFit{key: key, fit: ft}
	m.mu.Unlock()
	return ft
}

// shape is a use case's twin before its laws are fitted: its requests'
// shape, the KV cache that admits them where the engine says, and the lag
// before a prompt reaches the engine (Prior.Lag: τ0 − τq pooled over the
// use cases, never negative).
func (u UseCase) shape() twin {
	tw := twin{output: float64(max(u.OutputTokens, 2)), input: float64(u.InputTokens), held: u.held(), lag: u.Prior.Lag}
	if u.KVTokens > 0 {
		tw.kv = u.KVTokens
	}
	return tw
}
