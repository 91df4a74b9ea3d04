package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/headroom-dev/headroom/internal/contract"
	"github.com/headroom-dev/headroom/internal/secret"
)

// Scenario is what one probe asks for.
type Scenario struct {
	Name         string
	InputTokens  int
	OutputTokens int
	Cold         bool
	Timeout      time.Duration
}

// Prober probes one target: it resolves the model, finds the tokenizer, sizes
// each scenario's prompt and keeps that sizing calibrated across probes.
type Prober struct {
	ep     Endpoint
	api    string
	engine string

	shared *Shared

	mu      sync.Mutex
	model   string
	counter *httpCounter
	sizers  map[string]*Sizer
	// template is the chat template's tokens where counter does not see it.
	template   int
	templateOK bool
}

// ProberOption changes what a Prober shares.
type ProberOption func(*Prober)

// WithShared has the prober keep its request bodies and prompt-size fits
// in s, with the other probers of s; without it, a prober has its own.
func WithShared(s *Shared) ProberOption { return func(p *Prober) { p.shared = s } }

// NewProber returns a prober; model "" means the first model the server lists.
func NewProber(ep Endpoint, api, model, engine string, opts ...ProberOption) *Prober {
	p := &Prober{ep: ep, api: api, model: model, engine: engine, sizers: map[string]*Sizer{}}
	for _, o := range opts {
		o(p)
	}
	if p.shared == nil {
		p.shared = NewShared()
	}
	return p
}

// Model is the model being probed, "" until resolved, with the endpoint's
// credentials masked: it is shown as a label, on /status and in reports,
// and a server may list its key as a model's id.
func (p *Prober) Model() string {
	return secret.Redact(p.resolved(), p.ep.secrets()...)
}

// resolved is the model's id as the server knows it, for its requests.
func (p *Prober) resolved() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.model
}

// SetEngine records the engine once known, for engine-specific request fields.
func (p *Prober) SetEngine(engine string) {
	p.mu.Lock()
	p.engine = engine
	p.mu.Unlock()
}

// Resolve finds the model and looks for a tokenize endpoint. A missing
// tokenizer is no error: sizing then learns from usage.prompt_tokens.
func (p *Prober) Resolve(ctx context.Context) error {
	p.mu.Lock()
	model, engine := p.model, p.engine
	p.mu.Unlock()
	if model == "" {
		m, err := FirstModel(ctx, p.ep)
		if err != nil {
			return err
		}
		model = m
	}
	c, _ := DetectCounter(ctx, p.ep, p.api, model, engine)
	p.mu.Lock()
	p.model, p.counter = model, c
	p.mu.Unlock()
	return nil
}

// fitKey is what a prompt-size fit depends on: the server's tokenizer
// (the model, and the engine that wraps it in its chat template) and the
// length.
type fitKey struct {
	model, api, engine string
	tokenizer          string // the tokenize endpoint's shape; "" for usage counts
	raw                bool
	input              int
}

// fit is a fit of the key made by a prober of s, if any.
func (s *Shared) fit(k fitKey) (Sizer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.fits[k]
	return f, ok
}

func (s *Shared) putFit(k fitKey, f Sizer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.fits[k]; !ok {
		evict(s.fits)
	}
	s.fits[k] = f
}

// sizer returns the scenario's sizer: a copy of the fit another prober of
// the same tokenizer made, or a new fit with the server's tokenizer where
// there is one (plus the chat template it does not count), else with two
// short usage counts. Each prober corrects its copy from its own server's
// usage counts (Sizer.Observe), so a server that miscounts misleads only
// its own. A fit cut short by ctx is not kept: the next probe fits again
// rather than sending prompts of a default guess; only a fit that
// succeeded is shared.
func (p *Prober) sizer(ctx context.Context, sc Scenario) *Sizer {
	// By name and length: a scenario renamed or resized is sized anew.
	key := fmt.Sprintf("%s/%d", sc.Name, sc.InputTokens)
	p.mu.Lock()
	s, ok := p.sizers[key]
	c := p.counter
	fk := fitKey{model: p.model, api: p.api, engine: p.engine, input: sc.InputTokens}
	p.mu.Unlock()
	if ok {
		return s
	}
	if c != nil {
		fk.tokenizer, fk.raw = c.shape.name, c.raw
	}
	if f, ok := p.shared.fit(fk); ok {
		s = &f
		p.mu.Lock()
		p.sizers[key] = s
		p.mu.Unlock()
		return s
	}
	s = NewSizer(sc.InputTokens)
	usage := usageCounter{ep: p.ep, api: p.api, model: p.resolved()}
	// A failed fit keeps the default model; usage feedback corrects it, and
	// probes off by more than Tolerance are PromptMismatch, not samples.
	var err error
	if c != nil {
		var count Counter = c
		if c.raw && p.api == "chat" {
			// The fit converges on the count the server will see, template
			// included: adding it afterwards along the fit's slope misses.
			var off int
			if off, err = p.templateOffset(ctx, c, usage); err == nil {
				count = offsetCounter{c, off}
			}
		}
		if cerr := s.Calibrate(ctx, count, Nonce()); err == nil {
			err = cerr
		}
	} else {
		err = s.CalibrateShort(ctx, usage, Nonce())
	}
	if ctx.Err() != nil {
		return s
	}
	p.mu.Lock()
	p.sizers[key] = s
	p.mu.Unlock()
	if err == nil {
		p.shared.putFit(fk, *s)
	}
	return s
}

// templateOffset is what the chat template adds to a prompt, for a
// tokenizer that counts the text alone (llama.cpp's /tokenize with content):
// the server's usage count of a short prompt less the tokenizer's. Measured
// once per prober; it costs one short prefill.
func (p *Prober) templateOffset(ctx context.Context, c *httpCounter, usage usageCounter) (int, error) {
	p.mu.Lock()
	off, ok := p.template, p.templateOK
	p.mu.Unlock()
	if ok {
		return off, nil
	}
	text := PromptText(Nonce(), shortWords[0])
	raw, err := c.Count(ctx, text)
	if err != nil {
		return 0, err
	}
	withTemplate, err := usage.Count(ctx, text)
	if err != nil {
		return 0, err
	}
	off = withTemplate - raw
	if off < 0 || off > maxOverhead {
		return 0, fmt.Errorf("chat template of %d tokens is not plausible", off)
	}
	p.mu.Lock()
	p.template, p.templateOK = off, true
	p.mu.Unlock()
	return off, nil
}

// offsetCounter counts what its counter does plus a fixed offset.
type offsetCounter struct {
	Counter
	off int
}

func (c offsetCounter) Count(ctx context.Context, text string) (int, error) {
	n, err := c.Counter.Count(ctx, text)
	return n + c.off, err
}

// Prepared is a probe ready to send: its model resolved, its prompt sized,
// built and encoded. A benchmark prepares a round before it starts the clock,
// so building prompts does not stagger the requests.
type Prepared struct {
	sc      Scenario
	api     string
	body    Body // its template nil when the preparation failed
	words   int
	sizer   *Sizer
	counter *httpCounter
	// err is a failed preparation, returned by Send: a pointer, for most
	// preparations succeed and a Result is most of a Prepared's size (a
	// burst's probes are prepared many at once, on a busy replica while
	// others wait for their slots).
	err *Result
}

// failed is a preparation that failed with res.
func failed(res Result) *Prepared { return &Prepared{err: &res} }

// failure is the failed preparation's result; the zero Result for one
// that did not fail.
func (pr *Prepared) failure() Result {
	if pr.err == nil {
		return Result{}
	}
	return *pr.err
}

// Prepare builds a probe of the scenario.
func (p *Prober) Prepare(ctx context.Context, sc Scenario) *Prepared {
	if p.resolved() == "" {
		if err := p.Resolve(ctx); err != nil {
			return failed(fail(Result{}, classifyCtx(ctx, requestFailure(err)), p.ep.redact(err)))
		}
	}
	s := p.sizer(ctx, sc)
	if ctx.Err() != nil {
		return failed(fail(Result{}, classifyCtx(ctx, ConnectError), p.ep.redact(fmt.Errorf("size the prompt: %w", context.Cause(ctx)))))
	}
	words := s.Words()
	nonce := ""
	p.mu.Lock()
	engine, model, counter := p.engine, p.model, p.counter
	p.mu.Unlock()
	if sc.Cold {
		nonce = Nonce()
	}
	body, err := p.body(bodyKey{api: p.api, model: model, engine: engine, words: words, maxTokens: sc.OutputTokens, cold: sc.Cold}, nonce)
	if err != nil {
		return failed(fail(Result{}, StreamError, err))
	}
	return &Prepared{sc: sc, api: p.api, body: body, words: words, sizer: s, counter: counter}
}

// Failed is the result of a preparation that failed (the model lookup, or
// sizing cut short by its deadline); ok is false for a probe ready to send.
func (pr *Prepared) Failed() (Result, bool) {
	return pr.failure(), pr.body.t == nil
}

// Send streams a prepared probe and measures it. A probe whose prompt the
// server counted more than Tolerance off the scenario's length is a
// PromptMismatch: it still corrects the sizing, but its latencies answer to
// another context. Errors come back redacted (send and Prepare redact them).
func (p *Prober) Send(ctx context.Context, pr *Prepared) Result {
	if pr.body.t == nil {
		return pr.failure()
	}
	pctx, cancel := context.WithTimeout(ctx, pr.sc.Timeout)
	defer cancel()
	res := send(pctx, p.ep, pr.api, pr.body, pr.sc.OutputTokens)
	if res.Outcome != Success && res.Outcome != ShortOutput {
		return res
	}
	if !res.TokensFromUsage && pr.counter != nil && pr.counter.raw {
		// Without a usage chunk, the server's tokenizer counts what was
		// streamed: one that counts text alone, or the template's tokens
		// would count as output.
		if n, err := pr.counter.Count(pctx, res.Text); err == nil && n > 0 {
			res.CompletionTokens = n
			if err := consistent(res, pr.sc.OutputTokens, len(res.Text)); err != nil {
				res.Text = ""
				return fail(res, UsageMismatch, err)
			}
			if n < pr.sc.OutputTokens {
				res.Outcome, res.Err = ShortOutput, fmt.Errorf("got %d of %d output tokens", n, pr.sc.OutputTokens)
			}
		}
	}
	res.Text = ""
	if res.PromptTokens > 0 {
		p.mu.Lock()
		pr.sizer.Observe(pr.words, res.PromptTokens)
		p.mu.Unlock()
		if !within(res.PromptTokens, pr.sc.InputTokens, Tolerance) {
			return fail(res, PromptMismatch, fmt.Errorf("the server counted %d prompt tokens, want %d within %.0f%% (or %d tokens)", res.PromptTokens, pr.sc.InputTokens, Tolerance*100, minSlack))
		}
	}
	return res
}

// Probe sends one probe of the scenario.
func (p *Prober) Probe(ctx context.Context, sc Scenario) Result {
	return p.Send(ctx, p.Prepare(ctx, sc))
}

// StatusError is an answer other than 200 OK to one of the requests
// around a probe (the model list): the server's answer, an http_error.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s: HTTP %d", e.URL, e.Code) }

// FirstModel returns the first model of GET /v1/models. Its id becomes a
// label: one that is empty, not UTF-8 or over contract.MaxLabelValue bytes
// is refused (set the target's model instead).
func FirstModel(ctx context.Context, ep Endpoint) (string, error) {
	url, err := ep.url("/v1/models")
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+ep.APIKey)
	}
	resp, err := ep.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("list models %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list models: %w", &StatusError{URL: url, Code: resp.StatusCode})
	}
	var out struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", fmt.Errorf("list models %s: %w", url, err)
	}
	if len(out.Data) == 0 {
		return "", fmt.Errorf("list models %s: no models served", url)
	}
	switch id := out.Data[0].ID; {
	case id == "":
		return "", fmt.Errorf("list models %s: the first model has no id; set the target's model", url)
	case len(id) > contract.MaxLabelValue || !utf8.ValidString(id):
		return "", fmt.Errorf("list models %s: the first model's id (%d bytes) is not a label value of at most %d bytes of UTF-8; set the target's model",
			url, len(id), contract.MaxLabelValue)
	default:
		return id, nil
	}
}

// Tokenizer names the tokenize endpoint the prober sizes prompts with, as
// "<engine's shape> <path>", "" where it found none (sizing then learns
// from the server's usage counts). Known after Resolve.
func (p *Prober) Tokenizer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.counter == nil {
		return ""
	}
	return p.counter.shape.name + " " + p.counter.shape.path
}

// ContextLength is the most tokens, prompt and output together, the
// server takes in one request, and where it said so: llama.cpp's /props
// (the n_ctx it serves, of the whole server; each of its slots gets a
// share), else the first model's max_model_len in /v1/models (vLLM,
// SGLang, headroom sim), else its meta.n_ctx_train (llama.cpp's training
// context). 0 and "" where the server says none of these.
func ContextLength(ctx context.Context, ep Endpoint) (tokens int, source string, err error) {
	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if getJSON(ctx, ep, "/props", &props) == nil && props.Settings.NCtx > 0 {
		return props.Settings.NCtx, "/props n_ctx", nil
	}
	var models struct {
		Data []struct {
			MaxModelLen int `json:"max_model_len"`
			Meta        struct {
				NCtxTrain int `json:"n_ctx_train"`
			} `json:"meta"`
		} `json:"data"`
	}
	if err := getJSON(ctx, ep, "/v1/models", &models); err != nil {
		return 0, "", err
	}
	switch {
	case len(models.Data) == 0:
	case models.Data[0].MaxModelLen > 0:
		return models.Data[0].MaxModelLen, "/v1/models max_model_len", nil
	case models.Data[0].Meta.NCtxTrain > 0:
		return models.Data[0].Meta.NCtxTrain, "/v1/models meta.n_ctx_train", nil
	}
	return 0, "", nil
}

// getJSON reads a JSON answer of at most 1 MiB from the endpoint's path.
func getJSON(ctx context.Context, ep Endpoint, path string, v any) error {
	url, err := ep.url(path)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+ep.APIKey)
	}
	resp, err := ep.Client.Do(req)
	if err != nil {
		return ep.redact(fmt.Errorf("get %s: %w", url, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &StatusError{URL: url, Code: resp.StatusCode}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	return nil
}
