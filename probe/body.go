package probe

import (
	"bytes"
	"fmt"
)

// placeholder stands where a nonce goes in a body template: as long as a
// Nonce and of letters no nonce, number or filler word has.
const placeholder = "zqzqzqzqzqzq"

// bodyKey is what a request body depends on besides its nonce.
type bodyKey struct {
	api, model, engine string
	words, maxTokens   int
	cold               bool
}

// bodyTemplate is an encoded body with the places of its nonce: a cold
// prompt's body differs from the last only there, so it is copied and
// patched rather than built and encoded again (a 32K-token prompt is a few
// hundred KB of JSON for each request of a sweep). direct: the placeholder
// could not be told apart (a model named with it), encode every body.
type bodyTemplate struct {
	body   []byte
	nonces []int
	direct bool
}

// body returns the encoded request body for the key with nonce in place.
func (p *Prober) body(k bodyKey, nonce string) ([]byte, error) {
	p.mu.Lock()
	t, ok := p.bodies[k]
	p.mu.Unlock()
	if !ok {
		var err error
		if t, err = newBodyTemplate(k); err != nil {
			return nil, err
		}
		p.mu.Lock()
		if len(p.bodies) > 64 { // lengths drawn from a distribution: keep a few dozen
			clear(p.bodies)
		}
		p.bodies[k] = t
		p.mu.Unlock()
	}
	switch {
	case t.direct:
		return encode(k, nonce)
	case len(t.nonces) == 0:
		return t.body, nil // no nonce: the same body every time, read-only
	}
	b := bytes.Clone(t.body)
	for _, at := range t.nonces {
		copy(b[at:], nonce)
	}
	return b, nil
}

// encode builds a request body: the prompt, and the engine's field that
// keeps a cold prompt out of its prefix cache.
func encode(k bodyKey, nonce string) ([]byte, error) {
	extra := map[string]any{}
	if k.cold {
		switch k.engine {
		case "vllm":
			extra["cache_salt"] = nonce
		case "llamacpp":
			extra["cache_prompt"] = false
		}
	}
	q := Request{API: k.api, Model: k.model, Prompt: PromptText(nonce, k.words), MaxTokens: k.maxTokens, Extra: extra}
	body, err := q.Body(true)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return body, nil
}

func newBodyTemplate(k bodyKey) (bodyTemplate, error) {
	if !k.cold {
		body, err := encode(k, "")
		return bodyTemplate{body: body}, err
	}
	body, err := encode(k, placeholder)
	if err != nil {
		return bodyTemplate{}, err
	}
	t := bodyTemplate{body: body}
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(placeholder))
		if j < 0 {
			break
		}
		t.nonces = append(t.nonces, i+j)
		i += j + len(placeholder)
	}
	want := 1 // the prompt's
	if k.engine == "vllm" {
		want++ // cache_salt
	}
	if len(t.nonces) != want {
		return bodyTemplate{direct: true}, nil
	}
	return t, nil
}
