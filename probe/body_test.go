package probe

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// A body read from the template is the body encoded afresh with that
// nonce, however it is read.
func TestBodyTemplate(t *testing.T) {
	tests := []struct {
		name string
		k    bodyKey
	}{
		{"vllm cold", bodyKey{api: "chat", model: "m", engine: "vllm", words: 50, maxTokens: 32, cold: true}},
		{"llamacpp cold", bodyKey{api: "chat", model: "m", engine: "llamacpp", words: 50, maxTokens: 32, cold: true}},
		{"completions cold", bodyKey{api: "completions", model: "m", engine: "sglang", words: 5, maxTokens: 2, cold: true}},
		{"warm", bodyKey{api: "chat", model: "m", engine: "vllm", words: 50, maxTokens: 32}},
		{"model named like the placeholder", bodyKey{api: "chat", model: placeholder, engine: "vllm", words: 5, maxTokens: 2, cold: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewProber(Endpoint{}, tc.k.api, tc.k.model, tc.k.engine)
			for range 3 {
				nonce := ""
				if tc.k.cold {
					nonce = Nonce()
				}
				got, err := p.body(tc.k, nonce)
				if err != nil {
					t.Fatal(err)
				}
				want, err := encode(tc.k, nonce)
				if err != nil {
					t.Fatal(err)
				}
				if got.Len() != len(want) {
					t.Errorf("Len %d, want %d", got.Len(), len(want))
				}
				for name, r := range map[string]io.Reader{"whole": got.reader(), "a byte at a time": iotest.OneByteReader(got.reader()), "half": iotest.HalfReader(got.reader())} {
					b, err := io.ReadAll(r)
					if err != nil || !bytes.Equal(b, want) {
						t.Fatalf("read %s: %v\n %s\nwant\n %s", name, err, b, want)
					}
				}
				if err := iotest.TestReader(got.reader(), want); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// Probers of one Shared hold one template per prompt shape, whatever
// their number.
func TestBodiesShared(t *testing.T) {
	s := NewShared()
	k := bodyKey{api: "chat", model: "m", engine: "vllm", words: 5000, maxTokens: 32, cold: true}
	var first *bodyTemplate
	for range 100 {
		b, err := NewProber(Endpoint{}, "chat", "m", "vllm", WithShared(s)).body(k, Nonce())
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = b.t
		}
		if b.t != first {
			t.Fatal("a prober made a template of its own")
		}
	}
	if len(s.bodies) != 1 {
		t.Errorf("%d templates for one shape", len(s.bodies))
	}
	for i := range 2 * maxShared {
		k.words = i
		if _, err := s.template(k); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.bodies) > maxShared {
		t.Errorf("%d templates kept, at most %d", len(s.bodies), maxShared)
	}
}
