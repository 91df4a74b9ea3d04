package secret

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	const key = "sk-live-4f9a8b7c"
	tests := []struct{ in, want string }{
		{"HTTP 401: invalid key " + key, "HTTP 401: invalid key <secret>"},
		{`{"error":"bad header Authorization: Bearer sk-other-123456"}`, `{"error":"bad header Authorization: Bearer <secret>"}`},
		{"authorization=Basic dXNlcjpwYXNz", "authorization=Basic <secret>"},
		{"url?auth=Bearer%20abcdefgh", "url?auth=Bearer%20<secret>"},
		{"no secret here", "no secret here"},
		// An LLM server's errors talk of tokens: none of that is a credential.
		{"the token limit was exceeded: basic auth required", "the token limit was exceeded: basic auth required"},
		{"Token f00dbabe1234", "Token <secret>"},
	}
	for _, tc := range tests {
		if got := Redact(tc.in, key, ""); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestErrorKeepsCause(t *testing.T) {
	err := Error(fmt.Errorf("post: key k3y-secret-value: %w", context.DeadlineExceeded), "k3y-secret-value")
	if strings.Contains(err.Error(), "k3y") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v", err)
	}
	if Error(nil, "x") != nil {
		t.Error("nil error became non-nil")
	}
}

// A cut never leaves a secret's first part: whatever the length before it
// (a server that pads its echo to put the cut inside the key), no prefix
// of two or more of the key's characters survives.
func TestTruncateAtEveryCut(t *testing.T) {
	const key = "sk-live-4f9a8b7c"
	for pad := range 40 {
		for _, tc := range []struct{ name, text string }{
			{"key", strings.Repeat("x", pad) + key + " and more text after it"},
			{"bearer", strings.Repeat("x", pad) + "Authorization: Bearer zz-unknown-credential-99 after"},
		} {
			got := Truncate(tc.text, 24, key)
			if len(got) > 24+len(Mask)+len("…") {
				t.Errorf("%s pad %d: %q is longer than the cut", tc.name, pad, got)
			}
			body := strings.TrimSuffix(got, "…")
			if !strings.HasSuffix(got, "…") {
				t.Errorf("%s pad %d: %q does not mark its cut", tc.name, pad, got)
			}
			for _, secret := range []string{key, "zz-unknown-credential-99"} {
				for k := 2; k <= len(secret); k++ {
					if strings.Contains(body, secret[:k]) {
						t.Fatalf("%s pad %d: %q keeps %q of the secret", tc.name, pad, got, secret[:k])
					}
				}
			}
		}
	}
	if got := Truncate("short", 24, key); got != "short" {
		t.Errorf("a text under the limit: %q", got)
	}
	if got := Truncate("héllo wörld", 2); got != "h…" {
		t.Errorf("cut inside a rune: %q", got)
	}
}
