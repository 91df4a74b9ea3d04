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
