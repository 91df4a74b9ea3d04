package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// MaxPage bounds how much of a /metrics page is read: a runaway exporter must
// not exhaust headroom's memory.
const MaxPage = 32 << 20

// Scrape fetches and parses a target's own metrics page.
func Scrape(ctx context.Context, client *http.Client, url, apiKey, engine string) (Load, error) {
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
	lr := &io.LimitedReader{R: resp.Body, N: MaxPage + 1}
	l, err := Parse(lr, engine)
	if lr.N <= 0 {
		return Load{}, fmt.Errorf("scrape %s: page larger than %d bytes", url, MaxPage)
	}
	if err != nil {
		return Load{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return l, nil
}
