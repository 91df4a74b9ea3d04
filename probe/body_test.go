package probe

import (
	"bytes"
	"testing"
)

// A body patched from the template is the body encoded afresh with that nonce.
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
				if !bytes.Equal(got, want) {
					t.Fatalf("patched body\n %s\nwant\n %s", got, want)
				}
			}
		})
	}
}
