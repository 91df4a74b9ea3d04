package engine

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/sync/semaphore"
)

// MaxPage bounds how much of a /metrics page is read: a runaway exporter must
// not exhaust headroom's memory.
const MaxPage = 32 << 20

// Pages bounds how many metrics pages its callers read and parse at once. A
// page read holds a 64 KiB line reader, the kept lines and the parser's
// families until it is parsed, and a fleet's targets each read on a loop of
// their own: on a busy replica hundreds of reads were under way at once
// (12.6 MB of a 91 MB live heap at 1,000 targets), most of them waiting for
// a CPU rather than for their engine.
type Pages struct{ slots *semaphore.Weighted }

// NewPages returns a bound of n pages read at once.
func NewPages(n int) *Pages { return &Pages{slots: semaphore.NewWeighted(int64(n))} }

// Scrape fetches and parses a target's own metrics page, with no bound
// beyond its own.
func Scrape(ctx context.Context, client *http.Client, url, apiKey, engine string) (Load, error) {
	return (*Pages)(nil).Scrape(ctx, client, url, apiKey, engine)
}

// Scrape fetches and parses a target's own metrics page, holding one of p's
// slots (a nil p has no bound) from the response's headers until its body is
// parsed: an engine slow to answer holds none while it thinks, and the wait
// for a slot counts against ctx's deadline like the rest of the read.
func (p *Pages) Scrape(ctx context.Context, client *http.Client, url, apiKey, engine string) (Load, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Load{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Load{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Load{}, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	if p != nil {
		if err := p.slots.Acquire(ctx, 1); err != nil {
			return Load{}, fmt.Errorf("scrape %s: waiting to read the page: %w", url, err)
		}
		defer p.slots.Release(1)
	}
	l, err := Parse(resp.Body, engine)
	if err != nil {
		return Load{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return l, nil
}
