package probe

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A redirect to another scheme, port or host is refused, as an http_error
// saying why, and the other end never sees the key; one within the
// target's origin is followed.
func TestRedirectsStayInTheOrigin(t *testing.T) {
	const key = "sk-redirect-5e6f7a8b"
	var leaked atomic.Value
	leaked.Store("")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked.Store(a)
		}
		stream200(w)
	}))
	defer other.Close()
	redirect := func(to func(*http.Request) string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/moved/v1/chat/completions" {
				stream200(w)
				return
			}
			http.Redirect(w, r, to(r), http.StatusTemporaryRedirect)
		})
	}
	tls := httptest.NewTLSServer(redirect(func(r *http.Request) string { return other.URL + r.URL.Path }))
	defer tls.Close()
	port := httptest.NewServer(redirect(func(r *http.Request) string { return other.URL + r.URL.Path }))
	defer port.Close()
	var self *httptest.Server
	self = httptest.NewServer(redirect(func(r *http.Request) string { return self.URL + "/moved" + r.URL.Path }))
	defer self.Close()
	for _, tc := range []struct {
		name, url string
		want      Outcome
	}{
		{"https to http on another port", tls.URL, HTTPError},
		{"another port of the host", port.URL, HTTPError},
		{"the same origin", self.URL, Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(t.Context(), Endpoint{BaseURL: tc.url, APIKey: key, Client: NewClient(true)}, Request{API: "chat", Model: "m", Prompt: "hi", MaxTokens: 2})
			if r.Outcome != tc.want {
				t.Fatalf("outcome %s (%v), want %s", r.Outcome, r.Err, tc.want)
			}
			if tc.want != Success && !strings.Contains(r.Err.Error(), "redirect to another scheme, host or port refused") {
				t.Errorf("error %v does not say the redirect was refused", r.Err)
			}
			if got := leaked.Load().(string); got != "" {
				t.Fatalf("the other port got Authorization %q", got)
			}
		})
	}
}

func stream200(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range []string{"a", "b"} {
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", c)
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
}

// The model list's answers: a status other than 200 is an http_error (a
// base URL ending in /v1 asks for /v1/v1/models), an id that is the key is
// masked wherever it is shown, an id too long or empty for a label is
// refused, and paths join a base URL's own path.
func TestModelList(t *testing.T) {
	const key = "sk-model-id-1a2b3c4d"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"data":[{"id":"m"}]}`) })
	mux.HandleFunc("GET /key/v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"data":[{"id":%q}]}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	})
	mux.HandleFunc("GET /long/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"data":[{"id":%q}]}`, strings.Repeat("x", 100_000))
	})
	mux.HandleFunc("GET /empty/v1/models", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"data":[{"id":""}]}`) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		name, base string
		model      string // shown, when resolved
		outcome    Outcome
		err        string
	}{
		{"plain", srv.URL, "m", "", ""},
		{"trailing slash", srv.URL + "/", "m", "", ""},
		{"base ending in /v1", srv.URL + "/v1", "", HTTPError, "/v1/v1/models: HTTP 404"},
		{"the key as the id", srv.URL + "/key", "<secret>", "", ""},
		{"100 KB id", srv.URL + "/long", "", ConnectError, "(100000 bytes) is not a label value of at most 1024 bytes"},
		{"empty id", srv.URL + "/empty", "", ConnectError, "the first model has no id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProber(Endpoint{BaseURL: tc.base, APIKey: key, Client: NewClient(false)}, "chat", "", "none")
			pr := p.Prepare(t.Context(), Scenario{Name: "s", InputTokens: 64, OutputTokens: 2, Timeout: 5e9})
			res, failed := pr.Failed()
			if tc.outcome == "" {
				if got := p.Model(); got != tc.model {
					t.Errorf("model %q, want %q", got, tc.model)
				}
				return
			}
			if !failed || res.Outcome != tc.outcome || !strings.Contains(res.Err.Error(), tc.err) {
				t.Fatalf("failed %v, outcome %s, error %v; want %s with %q", failed, res.Outcome, res.Err, tc.outcome, tc.err)
			}
			if strings.Contains(res.Err.Error(), key) || strings.Contains(res.Err.Error(), "xxxxxxxx") {
				t.Errorf("error carries the key or the id: %.200v", res.Err)
			}
		})
	}
}
