// Package preflight tries a configured target once, as `headroom
// check-config --probe` does, and says what it found: the model, the
// context length, the tokenizer, a one-token request's answer, the engine
// on its metrics page, and which of the target's scenarios do not fit its
// context. A configuration can be valid and still never work against the
// server it names; this is where an operator learns that before the daemon
// runs.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/probe"
)

// StepTimeout bounds each request of a check: a server that does not
// answer a model list in that long will not answer a probe either.
const StepTimeout = 10 * time.Second

// Report is what one target answered.
type Report struct {
	Target        string
	Model         string
	Context       int    // tokens, 0 when the server did not say
	ContextSource string // where it said so
	Tokenizer     string // "" when it has none: sizing learns from usage
	Request       string // the one-token request's outcome
	Engine        string // from its metrics page; "" when unreadable
	Load          engine.Load
	// TooLong lists the target's scenarios whose prompt and output exceed
	// the context, each with what it needs.
	TooLong []string
	// Errs are the steps that failed, each naming its step.
	Errs []error
}

// Clients builds a target's HTTP clients as the daemon does (monitor.Clients):
// one for its API, one for its metrics page, which gets the key only where
// metricsKey says.
type Clients func(config.Target) (api, metrics *http.Client, metricsKey bool, err error)

// Check tries the target once; each step has StepTimeout.
func Check(ctx context.Context, t config.Target, scenarios []config.Scenario, clients Clients) Report {
	r := Report{Target: t.Name}
	key, err := t.APIKey()
	if err != nil {
		r.Errs = append(r.Errs, fmt.Errorf("api key: %w", err))
		return r
	}
	api, metrics, metricsKey, err := clients(t)
	if err != nil {
		r.Errs = append(r.Errs, err)
		return r
	}
	step := func(f func(context.Context)) {
		sctx, cancel := context.WithTimeout(ctx, StepTimeout)
		defer cancel()
		f(sctx)
	}
	// The metrics page first: its engine shapes the requests (llama.cpp's
	// cache_prompt, vLLM's cache_salt).
	step(func(ctx context.Context) {
		if t.Engine == "none" {
			return // configured not to be read
		}
		mkey := ""
		if metricsKey {
			mkey = key
		}
		l, err := engine.Scrape(ctx, metrics, t.MetricsURL, mkey, t.Engine)
		if err != nil {
			r.Errs = append(r.Errs, fmt.Errorf("metrics page: %w", err))
			return
		}
		r.Engine, r.Load = l.Engine, l
	})
	engineName := r.Engine
	if engineName == "" {
		engineName = "auto"
	}
	ep := probe.Endpoint{BaseURL: t.URL, APIKey: key, Client: api}
	p := probe.NewProber(ep, t.API, t.Model, engineName)
	step(func(ctx context.Context) {
		if err := p.Resolve(ctx); err != nil {
			r.Errs = append(r.Errs, fmt.Errorf("models: %w", err))
			return
		}
		r.Model, r.Tokenizer = p.Model(), p.Tokenizer()
	})
	step(func(ctx context.Context) {
		n, src, err := probe.ContextLength(ctx, ep)
		if err != nil {
			r.Errs = append(r.Errs, fmt.Errorf("context length: %w", err))
		}
		r.Context, r.ContextSource = n, src
	})
	if r.Model != "" {
		step(func(ctx context.Context) {
			res := p.Probe(ctx, probe.Scenario{Name: "check", InputTokens: 128, OutputTokens: 1, Cold: true, Timeout: StepTimeout})
			if res.Outcome != probe.Success && res.Outcome != probe.ShortOutput {
				r.Errs = append(r.Errs, fmt.Errorf("a one-token request: %s: %w", res.Outcome, res.Err))
				return
			}
			r.Request = fmt.Sprintf("answered in %s (%d prompt tokens)", res.E2E.Round(time.Millisecond), res.PromptTokens)
		})
	}
	if r.Context > 0 {
		for _, s := range scenarios {
			if need := s.InputTokens + s.OutputTokens; need > r.Context {
				r.TooLong = append(r.TooLong, fmt.Sprintf("%s (%d + %d tokens)", s.Name, s.InputTokens, s.OutputTokens))
			}
		}
	}
	return r
}

// Write prints the report for an operator, one finding a line.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	or := func(v, none string) string {
		if v == "" {
			return none
		}
		return v
	}
	fmt.Fprintf(&b, "target %s:\n", r.Target)
	fmt.Fprintf(&b, "  engine:    %s\n", or(r.Engine, "unknown (metrics page unreadable)"))
	fmt.Fprintf(&b, "  model:     %s\n", or(r.Model, "unknown"))
	if r.Context > 0 {
		fmt.Fprintf(&b, "  context:   %d tokens (%s)\n", r.Context, r.ContextSource)
	} else {
		b.WriteString("  context:   unknown (the server states none)\n")
	}
	fmt.Fprintf(&b, "  tokenizer: %s\n", or(r.Tokenizer, "none found: prompts are sized from the server's usage counts"))
	fmt.Fprintf(&b, "  request:   %s\n", or(r.Request, "not answered"))
	if len(r.TooLong) > 0 {
		fmt.Fprintf(&b, "  scenarios that do not fit its context of %d tokens, and so fail every probe: %s; leave them out with this target's scenarios: list\n",
			r.Context, strings.Join(r.TooLong, ", "))
	}
	for _, err := range r.Errs {
		fmt.Fprintf(&b, "  error:     %v\n", err)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Err is every failed step, nil when the target answered each.
func (r Report) Err() error { return errors.Join(r.Errs...) }
