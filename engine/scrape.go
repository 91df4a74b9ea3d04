package engine

import (
	"context"
	"fmt"
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
	l, err := Parse(resp.Body, engine)
	if err != nil {
		return Load{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return l, nil
}
