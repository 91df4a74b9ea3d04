package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
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

	mu      sync.Mutex
	model   string
	counter Counter
	sizers  map[string]*Sizer
}

// NewProber returns a prober; model "" means the first model the server lists.
func NewProber(ep Endpoint, api, model, engine string) *Prober {
	return &Prober{ep: ep, api: api, model: model, engine: engine, sizers: map[string]*Sizer{}}
}

// Model is the model being probed, "" until resolved.
func (p *Prober) Model() string {
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

func (p *Prober) sizer(ctx context.Context, sc Scenario) *Sizer {
	p.mu.Lock()
	s, ok := p.sizers[sc.Name]
	c := p.counter
	p.mu.Unlock()
	if ok {
		return s
	}
	s = NewSizer(sc.InputTokens)
	// A failed calibration keeps the default model; usage feedback corrects it.
	if c != nil {
		_ = s.Calibrate(ctx, c, Nonce())
	} else {
		_ = s.CalibrateShort(ctx, usageCounter{ep: p.ep, api: p.api, model: p.Model()}, Nonce())
	}
	p.mu.Lock()
	p.sizers[sc.Name] = s
	p.mu.Unlock()
	return s
}

// Prepared is a probe ready to send: its model resolved, its prompt sized,
// built and encoded. A benchmark prepares a round before it starts the clock,
// so building prompts does not stagger the requests.
type Prepared struct {
	sc      Scenario
	api     string
	body    []byte
	words   int
	sizer   *Sizer
	counter Counter
	err     Result // a failed preparation, returned by Send
}

// Prepare builds a probe of the scenario.
func (p *Prober) Prepare(ctx context.Context, sc Scenario) *Prepared {
	if p.Model() == "" {
		if err := p.Resolve(ctx); err != nil {
			return &Prepared{err: fail(Result{}, classifyCtx(ctx, ConnectError), err)}
		}
	}
	s := p.sizer(ctx, sc)
	words := s.Words()
	nonce := ""
	p.mu.Lock()
	engine, model, counter := p.engine, p.model, p.counter
	p.mu.Unlock()
	extra := map[string]any{}
	if sc.Cold {
		nonce = Nonce()
		switch engine {
		case "vllm":
			extra["cache_salt"] = nonce
		case "llamacpp":
			extra["cache_prompt"] = false
		}
	}
	q := Request{API: p.api, Model: model, Prompt: PromptText(nonce, words), MaxTokens: sc.OutputTokens, Extra: extra}
	body, err := q.Body(true)
	if err != nil {
		return &Prepared{err: fail(Result{}, StreamError, fmt.Errorf("encode request: %w", err))}
	}
	return &Prepared{sc: sc, api: p.api, body: body, words: words, sizer: s, counter: counter}
}

// Send streams a prepared probe and measures it.
func (p *Prober) Send(ctx context.Context, pr *Prepared) Result {
	if pr.body == nil {
		return pr.err
	}
	pctx, cancel := context.WithTimeout(ctx, pr.sc.Timeout)
	defer cancel()
	res := send(pctx, p.ep, pr.api, pr.body, pr.sc.OutputTokens)
	if res.Outcome != Success && res.Outcome != ShortOutput {
		return res
	}
	if !res.TokensFromUsage && pr.counter != nil {
		// Without a usage chunk, the server's tokenizer counts what was streamed.
		if n, err := pr.counter.Count(ctx, res.Text); err == nil && n > 0 {
			res.CompletionTokens = n
			if n < pr.sc.OutputTokens {
				res.Outcome, res.Err = ShortOutput, fmt.Errorf("got %d of %d output tokens", n, pr.sc.OutputTokens)
			}
		}
	}
	if res.PromptTokens > 0 {
		p.mu.Lock()
		pr.sizer.Observe(pr.words, res.PromptTokens)
		p.mu.Unlock()
	}
	res.Text = ""
	return res
}

// Probe sends one probe of the scenario.
func (p *Prober) Probe(ctx context.Context, sc Scenario) Result {
	return p.Send(ctx, p.Prepare(ctx, sc))
}

// FirstModel returns the first model of GET /v1/models.
func FirstModel(ctx context.Context, ep Endpoint) (string, error) {
	url := strings.TrimRight(ep.BaseURL, "/") + "/v1/models"
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
		return "", fmt.Errorf("list models %s: HTTP %d", url, resp.StatusCode)
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
	return out.Data[0].ID, nil
}
