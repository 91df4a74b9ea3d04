package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/internal/scripted"
)

// Secrets of the hardening cases: each must appear nowhere, nor any of
// their prefixes of 6 characters or more.
const (
	hardKey    = "Zq9-hardening-key-77e1"
	hardHeader = "Hx4-header-secret-0b2c"
)

func noSecret(t *testing.T, where, text string) {
	t.Helper()
	if leak := scripted.Leak(text, hardKey, hardHeader); leak != "" {
		t.Errorf("%s carries %q of a secret", where, leak)
	}
}

// TestHardening runs the daemon's cases of issue 37 against servers on the
// test's network, all in one daemon; every log line and page is searched
// for the secrets. (Case 12, an invalid file_sd file in the directory the
// daemon logs into, is fleet's TestFileSDErrorLoggedIntoItsDirectoryOnce:
// a file watch is no part of a virtual-time world.)
func TestHardening(t *testing.T) {
	t.Setenv("HEADROOM_TEST_API_KEY", hardKey)
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		dir := t.TempDir()
		pad := 256 - len(hardKey) + 1 // the 256-byte cut falls inside the key's last character
		echoCut := w.serve("echo-cut", scripted.Fake(func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, strings.Repeat("p", pad)+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+" and more", http.StatusInternalServerError)
		}))
		headers := w.serve("headers", scripted.Fake(func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "bad header X-Api-Key: "+r.Header.Get("X-Api-Key"), http.StatusInternalServerError)
		}))
		var leaked atomic.Value
		leaked.Store("")
		elsewhere := w.serve("elsewhere", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if a := r.Header.Get("Authorization"); a != "" {
				leaked.Store(a)
			}
			scripted.Fake(scripted.Fixed(16, 512, 16)).ServeHTTP(rw, r)
		}))
		redirect := w.serveTLS("example.com", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, elsewhere+r.URL.Path, http.StatusTemporaryRedirect)
		}))
		keyModel := w.serve("key-model", scripted.WithPath(scripted.Fake(scripted.Fixed(16, 512, 16)), "/v1/models", scripted.Models("")))
		v1 := w.serve("v1", scripted.Fake(scripted.Fixed(16, 512, 16)))
		endless := w.serve("endless", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			chunk := []byte(`[{"targets":["h:1"],"labels":{"x":"` + strings.Repeat("y", 64<<10) + `"}},`)
			for r.Context().Err() == nil {
				if _, err := rw.Write(chunk); err != nil {
					return
				}
			}
		}))
		sd, _ := json.Marshal([]map[string]any{
			{"targets": []string{"127.0.0.1:1"}, "labels": map[string]string{"target": strings.Repeat("x", 100_000)}},
			{"targets": []string{"127.0.0.1:2"}, "labels": map[string]string{"target": "reload", "__url__": "http://127.0.0.1:9835/-/reload?"}},
		})
		list := w.serve("sd", http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write(sd)
		}))
		d := w.startDaemon(writeConfig(t, dir, fmt.Sprintf(`targets:
  - {name: echo-cut, url: %q, api_key_env: HEADROOM_TEST_API_KEY}
  - name: headers
    url: %q
    http_client_config: {http_headers: {X-Api-Key: {secrets: [%s]}}}
  - name: redirect
    url: %q
    http_client_config: {tls_config: {insecure_skip_verify: true}, authorization: {credentials: %s}}
  - {name: key-model, url: %q, api_key_env: HEADROOM_TEST_API_KEY}
  - {name: v1, url: %q}
discovery:
  - http_sd_configs: [{url: %q}]
  - http_sd_configs: [{url: %q}]
max_in_flight: 8
probe_budget: 0.5
power: {source: none}
calibration: {enabled: false}
scenarios: [{name: s, input_tokens: 512, output_tokens: 16, interval: 1s, timeout: 5s}]
use_cases: [{name: u, scenario: s, ttft_max: 1s}]
`, echoCut, headers, hardHeader, redirect.URL, hardKey, keyModel, v1+"/v1", list+"/sd", endless+"/sd")))
		probes := func(target, result string) float64 {
			return d.scrape()[fmt.Sprintf("headroom_probes_total{result=%s,scenario=s,target=%s}", result, target)]
		}
		cases := []struct {
			name string
			done func() bool // the case's outcome has come
		}{
			{"3: an echo padded to put the cut inside the key", func() bool {
				return probes("echo-cut", "http_error") > 0 && d.logs.line("target=echo-cut", "HTTP 500: ppp", "<secret>")
			}},
			{"4: an http_headers secret echoed in a 500", func() bool {
				return probes("headers", "http_error") > 0 && d.logs.line("target=headers", "bad header X-Api-Key: <secret>")
			}},
			{"5: an https target's 307 to another host", func() bool {
				return probes("redirect", "http_error") > 0 && d.logs.line("target=redirect", "redirect to another scheme, host or port refused")
			}},
			{"9: the key as the model id", func() bool {
				return d.scrape()["headroom_target_info{engine=vllm,model=<secret>,pool=,target=key-model,url="+keyModel+"}"] == 1
			}},
			{"also: a base URL ending in /v1, its 404 an http_error", func() bool {
				return probes("v1", "http_error") > 0 && d.logs.line("targets[4].url: "+v1+"/v1 ends in /v1")
			}},
			{"10, 11: a __url__ with a query, a name of 100,000 bytes", func() bool {
				return d.scrape()["headroom_targets{source=discovery[0],state=invalid}"] == 2 &&
					d.logs.line("a base URL takes no query or fragment") && d.logs.line("a label value of at most 1024 bytes")
			}},
			{"8: an http_sd answer that never ends", func() bool { return d.logs.line("http_sd answer over the limit of 16 MiB") }},
		}
		for _, tc := range cases {
			waitFor(t, tc.name, time.Minute, tc.done)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.logs)
		}
		if got := leaked.Load().(string); got != "" {
			t.Errorf("case 5: the other host got Authorization %q", got)
		}
		if strings.Contains(d.get("/metrics"), strings.Repeat("x", 1025)) {
			t.Error("case 11: a label of over 1024 bytes is on /metrics")
		}
		for _, path := range []string{"/metrics", "/status", "/api/v1/status", "/"} {
			noSecret(t, path, d.get(path))
		}
		noSecret(t, "the daemon's log", d.logs.String())

		// 14: the landing page's Documentation link.
		if page := d.get("/"); strings.Contains(page, `href="/https:`) || !strings.Contains(page, `href="https://github.com/headroom-dev/headroom/tree/main/docs"`) {
			t.Errorf("the landing page's documentation link is not absolute:\n%s", page)
		}
	})
}

// Case 13 of issue 37: /-/reload answers 403 unless the lifecycle API is
// on, and a browser's cross-site POST even then.
func TestCrossSiteReloadRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		file := writeConfig(t, "", "power: {source: none}\n")
		load := func() (*config.Config, error) { return config.Load(file) }
		daemons := map[bool]*runningDaemon{false: w.start(load, fleet.Shard{}, false), true: w.start(load, fleet.Shard{}, true)}
		for _, tc := range []struct {
			lifecycle bool
			header    map[string]string
			want      int
		}{
			{false, map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, http.StatusForbidden},
			{false, nil, http.StatusForbidden},
			{true, map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
			{true, map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, http.StatusForbidden},
			{true, nil, http.StatusOK},
		} {
			req, _ := http.NewRequest(http.MethodPost, daemons[tc.lifecycle].url+"/-/reload", strings.NewReader("x"))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := w.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("lifecycle %v, headers %v: %d, want %d", tc.lifecycle, tc.header, resp.StatusCode, tc.want)
			}
		}
	})
}
