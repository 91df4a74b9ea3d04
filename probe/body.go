package probe

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
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
// prompt's body differs from the last only there, so it is read with the
// nonce in place rather than built and encoded again (a 96K-token prompt
// is 300 KB of JSON). direct: the placeholder could not be told apart (a
// model named with it), encode every body. Read-only once made: the
// probers of a Shared share it.
type bodyTemplate struct {
	body   []byte
	nonces []int
	direct bool
}

// Body is an encoded request body: a template, shared by every probe of
// its shape, read with this probe's nonce in its places. Nothing is copied.
type Body struct {
	t     *bodyTemplate
	nonce []byte // as long as placeholder where t has nonces
}

// bytesBody is a body encoded whole.
func bytesBody(b []byte) Body { return Body{t: &bodyTemplate{body: b}} }

// Len is the body's length in bytes.
func (b Body) Len() int { return len(b.t.body) }

// run is the body from off to the end of its run: the template's bytes up
// to the next nonce's place, or the rest of the nonce.
func (b Body) run(off int) []byte {
	for _, at := range b.t.nonces {
		switch {
		case off < at:
			return b.t.body[off:at]
		case off < at+len(placeholder):
			return b.nonce[off-at:]
		}
	}
	return b.t.body[off:]
}

func (b Body) reader() io.Reader { return &bodyReader{b: b} }

type bodyReader struct {
	b   Body
	off int
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.off < r.b.Len() {
		c := copy(p[n:], r.b.run(r.off))
		n += c
		r.off += c
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// maxShared bounds each of a Shared's caches. Past it, an entry drawn at
// random makes room for the next: a fleet of many models, or a bench
// drawing lengths from a spread, keeps what it uses most.
const maxShared = 256

// Shared is what the probers of a process share: request bodies, one per
// prompt shape, and prompt-size fits, one per model, API, engine,
// tokenizer and length. A fleet whose thousand targets serve one model
// holds each of its prompts once and sizes each once, not per target (each
// prompt of the default scenarios, about 650 KB a target, was kept per
// target; each sizing costs several tokenize calls of the whole prompt).
type Shared struct {
	mu     sync.Mutex
	bodies map[bodyKey]*bodyTemplate
	fits   map[fitKey]Sizer
}

// NewShared returns empty caches.
func NewShared() *Shared {
	return &Shared{bodies: map[bodyKey]*bodyTemplate{}, fits: map[fitKey]Sizer{}}
}

// evict makes room in m for one more entry.
func evict[K comparable, V any](m map[K]V) {
	if len(m) < maxShared {
		return
	}
	skip := rand.IntN(len(m))
	for k := range m {
		if skip == 0 {
			delete(m, k)
			return
		}
		skip--
	}
}

// template is the body template of k, made once.
func (s *Shared) template(k bodyKey) (*bodyTemplate, error) {
	s.mu.Lock()
	t, ok := s.bodies[k]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := newBodyTemplate(k)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.bodies[k]; ok { // made meanwhile by another prober: keep one
		return prev, nil
	}
	evict(s.bodies)
	s.bodies[k] = t
	return t, nil
}

// body returns the encoded request body for the key with nonce in place.
func (p *Prober) body(k bodyKey, nonce string) (Body, error) {
	t, err := p.shared.template(k)
	if err != nil {
		return Body{}, err
	}
	if t.direct || len(t.nonces) > 0 && len(nonce) != len(placeholder) {
		b, err := encode(k, nonce)
		return bytesBody(b), err
	}
	return Body{t: t, nonce: []byte(nonce)}, nil
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

func newBodyTemplate(k bodyKey) (*bodyTemplate, error) {
	if !k.cold {
		body, err := encode(k, "")
		return &bodyTemplate{body: body}, err
	}
	body, err := encode(k, placeholder)
	if err != nil {
		return nil, err
	}
	t := &bodyTemplate{body: body}
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
		return &bodyTemplate{direct: true}, nil
	}
	return t, nil
}
