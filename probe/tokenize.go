package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"syscall"
)

// Counter counts the prompt tokens a server will see for a prompt text.
type Counter interface {
	Count(ctx context.Context, text string) (int, error)
}

// tokenizeShape is one engine's tokenize endpoint.
type tokenizeShape struct {
	name string
	path string
	body func(api, model, text string) any
	// chatTemplate: for api chat, the shape wraps the text in the chat template.
	chatTemplate bool
}

// Shapes of the tokenize endpoints, tried in this order by DetectCounter.
var shapes = []tokenizeShape{
	{"vllm", "/tokenize", func(api, model, text string) any {
		if api == "chat" {
			return map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}}
		}
		return map[string]any{"model": model, "prompt": text}
	}, true},
	{"sglang", "/v1/tokenize", func(_, model, text string) any { return map[string]any{"model": model, "prompt": text} }, false},
	{"llamacpp", "/tokenize", func(_, _, text string) any { return map[string]any{"content": text} }, false},
	{"tgi", "/tokenize", func(_, _, text string) any { return map[string]any{"inputs": text} }, false},
}

// maxTokenizeAnswer bounds what a tokenize answer may take to read: a
// million token ids with their text (TGI's) stays under it.
const maxTokenizeAnswer = 64 << 20

type httpCounter struct {
	ep    Endpoint
	api   string
	model string
	shape tokenizeShape
	// raw: counts the text alone, no chat template around it. Such a
	// counter can count a completion's text; for chat prompts the
	// template's tokens must be added (Prober.templateOffset).
	raw bool
}

// newPost builds a POST of a JSON body to the endpoint's path, with its API
// key if any. It is marked idempotent (the key is not sent): a kept-alive
// connection the server closed as the request went out fails with EOF
// before any answer, and the transport then sends the request again on a
// fresh one. Asked twice, a count or a completion costs the server a little;
// lost, a sizing falls back to a guess and a probe fails for nothing the
// server's capacity did (llama.cpp closes connections after a few requests).
func newPost(ctx context.Context, ep Endpoint, path string, body Body) (*http.Request, string, error) {
	url, err := ep.url(path)
	if err != nil {
		return nil, url, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, url, err
	}
	// Read in place from the shared template, and again for a resend.
	req.ContentLength = int64(body.Len())
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.reader()), nil }
	req.Body, _ = req.GetBody()
	req.Header.Set("Content-Type", "application/json")
	req.Header["Idempotency-Key"] = []string{}
	if ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+ep.APIKey)
	}
	return req, url, nil
}

// postJSON posts a JSON body to the endpoint. The caller closes the body.
func postJSON(ctx context.Context, ep Endpoint, path string, body Body) (*http.Response, string, error) {
	req, url, err := newPost(ctx, ep, path, body)
	if err != nil {
		return nil, url, err
	}
	resp, err := do(ep, req)
	return resp, url, err
}

// do sends a request built by newPost, and once more when the kept-alive
// connection it went out on broke before any answer. The transport resends
// an idempotent request itself only when none of it was written; llama.cpp
// closes kept-alive connections after a few requests, and one whose 2,000
// token prompt was half written met a broken pipe ('write: broken pipe',
// connect_error) in a bench of 48 requests. A request cut off while it was
// written is no whole request the server can have acted on.
func do(ep Endpoint, req *http.Request) (*http.Response, error) {
	reused := false
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	})
	resp, err := ep.Client.Do(req.WithContext(ctx))
	if err == nil || !reused || req.GetBody == nil || req.Context().Err() != nil || !dropped(err) {
		return resp, err
	}
	again := req.Clone(req.Context())
	if again.Body, err = req.GetBody(); err != nil {
		return nil, err
	}
	return ep.Client.Do(again)
}

// dropped says whether a request failed on a connection the server closed:
// the write broke (a broken pipe, a reset, or the transport's reader saw the
// close first and shut the connection under the writer), or the answer never
// came (EOF).
func dropped(err error) bool {
	for _, cause := range []error{syscall.EPIPE, syscall.ECONNRESET, net.ErrClosed, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, cause) {
			return true
		}
	}
	return false
}

func (c *httpCounter) Count(ctx context.Context, text string) (int, error) {
	b, err := json.Marshal(c.shape.body(c.api, c.model, text))
	if err != nil {
		return 0, err
	}
	resp, url, err := postJSON(ctx, c.ep, c.shape.path, bytesBody(b))
	if err != nil {
		return 0, fmt.Errorf("tokenize %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return 0, fmt.Errorf("tokenize %s: HTTP %d", url, resp.StatusCode)
	}
	n, err := tokenCount(io.LimitReader(resp.Body, maxTokenizeAnswer))
	if err != nil {
		return 0, fmt.Errorf("tokenize %s: %w", url, err)
	}
	// The rest, if any, is read so that the connection is kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return n, nil
}

// DetectCounter finds the server's tokenize endpoint. engine narrows the search
// when known ("auto" tries every shape). An endpoint is taken only when its
// counts are plausible: more than zero, and more for a longer text (llama.cpp
// answers a chat-shaped body with an empty list, which once sized prompts at
// 262K tokens). It returns an error when there is none; prompt sizing then
// relies on usage.prompt_tokens feedback alone.
func DetectCounter(ctx context.Context, ep Endpoint, api, model, engine string) (*httpCounter, error) {
	var errs []error
	short, long := PromptText("", 8), PromptText("", 64)
	for _, s := range shapes {
		if engine != "auto" && engine != s.name && !(engine == "nim" && s.name == "vllm") {
			continue
		}
		c := &httpCounter{ep: ep, api: api, model: model, shape: s, raw: api != "chat" || !s.chatTemplate}
		a, err := c.Count(ctx, short)
		if err == nil {
			var b int
			if b, err = c.Count(ctx, long); err == nil && (a <= 0 || b <= a) {
				u, _ := ep.url(s.path)
				err = fmt.Errorf("tokenize %s: counts %d and %d tokens for 8 and 64 words", u, a, b)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return c, nil
	}
	return nil, fmt.Errorf("no tokenize endpoint: %w", errors.Join(errs...))
}

// usageCounter counts with the server itself: a one-token completion whose
// usage.prompt_tokens is the count, chat template included. It costs a prefill,
// so sizing uses it on short prompts only.
type usageCounter struct {
	ep         Endpoint
	api, model string
}

// Count streams the request, as probes do: a server may refuse
// non-streaming requests, and the usage chunk carries the same count.
func (c usageCounter) Count(ctx context.Context, text string) (int, error) {
	q := Request{API: c.api, Model: c.model, Prompt: text, MaxTokens: 1}
	b, err := q.Body(true)
	if err != nil {
		return 0, err
	}
	res := send(ctx, c.ep, c.api, bytesBody(b), 1)
	if res.Outcome != Success && res.Outcome != ShortOutput {
		return 0, fmt.Errorf("count tokens: %s: %w", res.Outcome, res.Err)
	}
	if res.PromptTokens <= 0 {
		u, _ := c.ep.url(Path(c.api))
		return 0, fmt.Errorf("count tokens %s: no usage.prompt_tokens in the stream", u)
	}
	return res.PromptTokens, nil
}
