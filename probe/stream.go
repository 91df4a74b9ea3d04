// Package probe sends one synthetic streaming request to an OpenAI-compatible
// server and measures what its user would have seen: time to first token, the
// inter-token latency and decode speed computed from the server's token count,
// end-to-end time, prefill speed and the longest stall.
package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/internal/secret"
)

// Outcome classifies a probe; its values are the `result` label.
type Outcome string

// Outcomes. Canceled is never exported: a probe cut short by shutdown is no measurement.
const (
	Success      Outcome = "success"
	ConnectError Outcome = "connect_error"
	HTTPError    Outcome = "http_error"
	Timeout      Outcome = "timeout"
	StreamError  Outcome = "stream_error"
	ShortOutput  Outcome = "short_output"
	// PromptMismatch: the server counted a prompt more than Tolerance off
	// the scenario's length; its latencies answer to another context.
	PromptMismatch Outcome = "prompt_mismatch"
	// UsageMismatch: the stream contradicts its own token count (more
	// chunks than tokens, more tokens than max_tokens, or more tokens than
	// bytes of text), so no decode speed or ITL can be derived from it.
	UsageMismatch Outcome = "usage_mismatch"
	Canceled      Outcome = "canceled"
)

// Outcomes lists the exported result labels, so counters can start at zero.
var Outcomes = []Outcome{Success, ConnectError, HTTPError, Timeout, StreamError, ShortOutput, PromptMismatch, UsageMismatch}

// maxErrorBody is how much of an error answer is kept for the log: enough
// for "context length exceeded", redacted like every error.
const maxErrorBody = 256

// maxLine bounds one SSE line; a chunk carrying a whole 256K-token echo stays under it.
const maxLine = 16 << 20

// Endpoint is where and how to reach a server. The API key is sent, never
// printed; Secrets are the other credentials its Client sends (from an
// http_client_config), masked in errors as the key is.
type Endpoint struct {
	BaseURL string
	APIKey  string
	Secrets []string
	Client  *http.Client
}

// url joins path to the base URL with url.JoinPath: a base that ends in a
// slash, or carries a path of its own, gets the API's path after it.
func (ep Endpoint) url(path string) (string, error) {
	u, err := url.JoinPath(ep.BaseURL, path)
	if err != nil {
		return "", fmt.Errorf("base URL: %w", err)
	}
	return u, nil
}

func (ep Endpoint) secrets() []string { return append([]string{ep.APIKey}, ep.Secrets...) }

// redact masks the endpoint's credentials in err.
func (ep Endpoint) redact(err error) error {
	return secret.Error(err, ep.secrets()...)
}

// cut keeps the first maxErrorBody bytes of a server's text, redacted
// before the cut and at it: a server that pads an echo of the key so that
// the cut falls inside it would otherwise get all but its end through.
func (ep Endpoint) cut(text []byte) string {
	return secret.Truncate(string(bytes.TrimSpace(text)), maxErrorBody, ep.secrets()...)
}

// errorBodyLimit is how much of an error answer to read: enough past
// maxErrorBody that a secret crossing the cut is read whole and redacted.
func (ep Endpoint) errorBodyLimit() int64 {
	n := maxErrorBody
	for _, s := range ep.secrets() {
		n = max(n, maxErrorBody+len(s))
	}
	return int64(n)
}

// Request is one completion to stream.
type Request struct {
	API       string // chat or completions
	Model     string
	Prompt    string
	MaxTokens int
	// Extra holds engine-specific fields (cache_salt, cache_prompt).
	Extra map[string]any
}

// Result is what one probe measured. Durations are from the monotonic clock and
// start when the request has been written, so connection set-up (Setup) stays out.
type Result struct {
	Outcome Outcome
	Err     error
	Status  int
	Start   time.Time
	Setup   time.Duration // DNS, TCP and TLS set-up, zero on a reused connection
	// TTFT and E2E are kept on a failure too, as far as the stream came
	// (zero: no content came): a calibration burst's probe cut by its
	// deadline still had its place in the prefill queue (monitor.Sample.Lost).
	TTFT   time.Duration // written -> first chunk with content
	E2E    time.Duration // written -> last content chunk
	Decode time.Duration // first -> last content chunk
	MaxGap time.Duration // longest gap between two content chunks
	// MedianGap is the median gap between two content chunks: the step a
	// decode took when nothing else lengthened it, where fewer than half
	// of its steps also prefilled another request's prompt.
	MedianGap        time.Duration
	PromptTokens     int
	CompletionTokens int
	TokensFromUsage  bool // false: CompletionTokens counts content chunks, a lower bound
	Chunks           int
	FinishReason     string
	Text             string
}

// Scaled is the result with its durations multiplied by f: a time-scaled
// simulator's wall times as the simulated times they stand for.
func (r Result) Scaled(f float64) Result {
	for _, d := range []*time.Duration{&r.Setup, &r.TTFT, &r.E2E, &r.Decode, &r.MaxGap, &r.MedianGap} {
		*d = time.Duration(float64(*d) * f)
	}
	return r
}

// ITL is the mean inter-token latency: decode time over the gaps between tokens.
func (r Result) ITL() time.Duration {
	if r.CompletionTokens < 2 {
		return 0
	}
	return r.Decode / time.Duration(r.CompletionTokens-1)
}

// SteadyITL is the inter-token latency of the decode's typical step: the
// mean ITL scaled by the median gap between chunks over their mean gap (so
// that chunks of several tokens count as ITL does), at most the mean. An
// engine that prefills other prompts in its decode steps, or between
// them, makes some steps longer; what production's prompts do to a
// probe's decode is not the probe's to know, and the typical step leaves
// it out while fewer than half the steps prefill.
func (r Result) SteadyITL() time.Duration {
	itl := r.ITL()
	if r.Chunks < 3 || r.MedianGap <= 0 || r.Decode <= 0 {
		return itl
	}
	mean := r.Decode / time.Duration(r.Chunks-1)
	return min(itl, time.Duration(float64(itl)*float64(r.MedianGap)/float64(mean)))
}

// DecodeTPS is the per-user decode speed, 1/ITL.
func (r Result) DecodeTPS() float64 {
	if r.CompletionTokens < 2 || r.Decode <= 0 {
		return 0
	}
	return float64(r.CompletionTokens-1) / r.Decode.Seconds()
}

// PrefillTPS is prompt tokens over TTFT.
func (r Result) PrefillTPS() float64 {
	if r.TTFT <= 0 {
		return 0
	}
	return float64(r.PromptTokens) / r.TTFT.Seconds()
}

type streamChunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
}

// Body builds the JSON request body: streaming with usage, and the output length
// pinned with max_tokens, min_tokens and ignore_eos.
func (q Request) Body(stream bool) ([]byte, error) {
	body := map[string]any{
		"model":       q.Model,
		"max_tokens":  q.MaxTokens,
		"min_tokens":  q.MaxTokens,
		"ignore_eos":  true,
		"temperature": 0,
		"stream":      stream,
	}
	if stream {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	if q.API == "completions" {
		body["prompt"] = q.Prompt
	} else {
		body["messages"] = []map[string]string{{"role": "user", "content": q.Prompt}}
	}
	for k, v := range q.Extra {
		body[k] = v
	}
	return json.Marshal(body)
}

// Path is the API path for the request's API.
func Path(api string) string {
	if api == "completions" {
		return "/v1/completions"
	}
	return "/v1/chat/completions"
}

// Run streams one request and measures it. ctx bounds the whole probe; when it
// expires the result is Timeout, when its parent is cancelled, Canceled.
func Run(ctx context.Context, ep Endpoint, q Request) Result {
	body, err := q.Body(true)
	if err != nil {
		return fail(Result{}, StreamError, fmt.Errorf("encode request: %w", err))
	}
	return send(ctx, ep, q.API, bytesBody(body), q.MaxTokens)
}

// send streams an encoded request body to the API's path and measures it.
// Its error never carries the API key, even where the server echoed it.
func send(ctx context.Context, ep Endpoint, api string, body Body, maxTokens int) (res Result) {
	defer func() { res.Err = ep.redact(res.Err) }()
	var setupStart time.Time
	// WroteRequest fires on the transport's writer goroutine, which may still
	// be running when a server answers before reading the whole body.
	var wroteMu sync.Mutex
	var wrote time.Time
	trace := &httptrace.ClientTrace{
		GetConn: func(string) { setupStart = time.Now() },
		GotConn: func(i httptrace.GotConnInfo) { setupOnce(&res, i, setupStart) },
		WroteRequest: func(httptrace.WroteRequestInfo) {
			wroteMu.Lock()
			wrote = time.Now()
			wroteMu.Unlock()
		},
	}
	req, url, err := newPost(httptrace.WithClientTrace(ctx, trace), ep, Path(api), body)
	if err != nil {
		return fail(res, ConnectError, fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Accept", "text/event-stream")
	res.Start = time.Now()
	resp, err := do(ep, req)
	if err != nil {
		return fail(res, classifyCtx(ctx, requestFailure(err)), fmt.Errorf("post %s: %w", url, err))
	}
	defer resp.Body.Close()
	wroteMu.Lock()
	if !wrote.IsZero() {
		res.Start = wrote
	}
	wroteMu.Unlock()
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, ep.errorBodyLimit()))
		return fail(res, HTTPError, fmt.Errorf("post %s: HTTP %d: %s", url, resp.StatusCode, ep.cut(msg)))
	}
	res = readStream(ctx, ep, resp.Body, res, maxTokens)
	// The stream's end (the last chunk of the chunked encoding) may follow
	// [DONE]: read it, or the transport closes the connection instead of
	// reusing it and the next probe pays a new one.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return res
}

func setupOnce(res *Result, i httptrace.GotConnInfo, start time.Time) {
	if !i.Reused && !start.IsZero() {
		res.Setup = time.Since(start)
	}
}

// readStream reads a completion's stream; ep cuts a server's error text.
func readStream(ctx context.Context, ep Endpoint, body io.Reader, res Result, maxTokens int) Result {
	ev := newEvents(body)
	var first, last time.Time
	var gaps []time.Duration
	var text strings.Builder
	var known shape // the server's token chunk, once one is decoded
	// add takes a chunk's content: a token, timed when its event completed.
	add := func(content []byte, now time.Time) {
		if len(content) == 0 {
			return
		}
		if first.IsZero() {
			first = now
			res.TTFT = first.Sub(res.Start)
		} else {
			gap := now.Sub(last)
			res.MaxGap = max(res.MaxGap, gap)
			gaps = append(gaps, gap)
		}
		last = now
		res.E2E = last.Sub(res.Start)
		res.Chunks++
		if text.Len() < maxLine {
			text.Write(content)
		}
	}
	done := false
	for {
		data, now, ok := ev.next()
		if !ok {
			break
		}
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) {
			done = true
			break
		}
		if content, ok := known.content(data); ok {
			add(content, now)
			continue
		}
		var c streamChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return fail(res, StreamError, fmt.Errorf("decode chunk %d: %w", res.Chunks+1, err))
		}
		if known.prefix == nil {
			known, _ = learn(data, &c)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" || c.Object == "error" {
			return fail(res, StreamError, fmt.Errorf("server error in stream: %s", ep.cut(append(bytes.TrimSpace(c.Error), c.Message...))))
		}
		if c.Usage != nil {
			res.PromptTokens = c.Usage.PromptTokens
			res.CompletionTokens = c.Usage.CompletionTokens
			res.TokensFromUsage = true
		}
		for _, ch := range c.Choices {
			add([]byte(ch.Text+ch.Delta.Content+ch.Delta.ReasoningContent+ch.Delta.Reasoning), now)
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				res.FinishReason = *ch.FinishReason
			}
		}
	}
	if err := ev.err(); err != nil {
		return fail(res, classifyCtx(ctx, StreamError), fmt.Errorf("read stream: %w", err))
	}
	if ctx.Err() != nil {
		return fail(res, classifyCtx(ctx, StreamError), ctx.Err())
	}
	if !done && res.FinishReason == "" {
		return fail(res, StreamError, errors.New("stream ended without finish_reason or [DONE]"))
	}
	if first.IsZero() {
		return fail(res, StreamError, errors.New("stream carried no content"))
	}
	res.Decode = last.Sub(first)
	if len(gaps) > 0 {
		slices.Sort(gaps)
		res.MedianGap = gaps[len(gaps)/2]
	}
	res.Text = text.String()
	if !res.TokensFromUsage {
		res.CompletionTokens = res.Chunks
	}
	if err := consistent(res, maxTokens, text.Len()); err != nil {
		return fail(res, UsageMismatch, err)
	}
	res.Outcome = Success
	if res.TokensFromUsage && res.CompletionTokens < maxTokens {
		res.Outcome = ShortOutput
		res.Err = fmt.Errorf("got %d of %d output tokens (finish_reason %q): the server ignores min_tokens/ignore_eos", res.CompletionTokens, maxTokens, res.FinishReason)
	}
	return res
}

// consistent checks a finished stream against its own token count: a decode
// speed from tokens the stream did not carry, or ITL from chunks that were
// not tokens, would be a number of no server. Engines may merge tokens into
// one chunk (vLLM does when the client reads slower than it decodes), but a
// token is at least one byte of text.
func consistent(res Result, maxTokens, textBytes int) error {
	switch n := res.CompletionTokens; {
	case res.Chunks > maxTokens:
		return fmt.Errorf("stream carried %d content chunks for max_tokens %d", res.Chunks, maxTokens)
	case n > maxTokens:
		return fmt.Errorf("usage counts %d completion tokens, above max_tokens %d", n, maxTokens)
	case res.Chunks > n:
		return fmt.Errorf("stream carried %d content chunks but usage counts %d completion tokens", res.Chunks, n)
	case n > textBytes && textBytes < maxLine:
		return fmt.Errorf("usage counts %d completion tokens for %d bytes of streamed text", n, textBytes)
	}
	return nil
}

// requestFailure is the outcome of a request that got no answer to read:
// a refused redirect or a status other than 200 is the server's answer, an
// http_error; the rest is the connection's.
func requestFailure(err error) Outcome {
	if errors.Is(err, ErrRedirect) || errors.As(err, new(*StatusError)) {
		return HTTPError
	}
	return ConnectError
}

func classifyCtx(ctx context.Context, otherwise Outcome) Outcome {
	switch {
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return Timeout
	case ctx.Err() != nil:
		return Canceled
	}
	return otherwise
}

func fail(res Result, o Outcome, err error) Result {
	res.Outcome = o
	res.Err = err
	return res
}

// ErrRedirect refuses a redirect that leaves the scheme, host and port of
// the request it answers.
var ErrRedirect = errors.New("redirect to another scheme, host or port refused: credentials go to the target's own only")

// maxRedirects is net/http's own limit.
const maxRedirects = 10

// SameOrigin is a CheckRedirect that follows a redirect only to the scheme,
// host and port of the first request, as the metrics_url rule sends the
// key only there. net/http forwards Authorization to another port of the
// same host and from https to http, and an http_client_config's
// credentials are set by its round tripper on every request, wherever it
// goes: a redirect elsewhere would carry them.
func SameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return fmt.Errorf("%w (%s://%s to %s://%s)", ErrRedirect, first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// NewClient returns a client that keeps connections alive and pooled, so TCP and
// TLS set-up stay out of TTFT. No overall timeout: each probe's context bounds it.
// It follows redirects within the target's origin only (SameOrigin).
func NewClient(insecureSkipVerify bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	tr.IdleConnTimeout = 15 * time.Minute
	tr.DisableCompression = true // compression buffers SSE and distorts chunk timing
	if insecureSkipVerify {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // opt-in for self-signed lab servers
	}
	return &http.Client{Transport: tr, CheckRedirect: SameOrigin}
}
