package scripted

import (
	"net/http"
	"sync"
	"time"
)

// Aftermath wraps a server so that the first completion request after
// several ran together pays for them, as on llama.cpp: it saves the slots
// a burst used to its prompt cache when the next task takes a slot, and on
// an H100 the next request's first token came 2.6-4.0 s late instead of
// 0.3 s. Here that request waits perSlot for each request of the largest
// group that ran together since the last request that found the server
// alone, before the wrapped server sees it.
func Aftermath(h http.Handler, perSlot time.Duration) http.Handler {
	var mu sync.Mutex
	inFlight, peak := 0, 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/v1/completions" {
			h.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		var wait time.Duration
		if inFlight == 0 {
			if peak > 1 {
				wait = time.Duration(peak) * perSlot
			}
			peak = 0
		}
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
		h.ServeHTTP(w, r)
	})
}
