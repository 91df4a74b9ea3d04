// Package secret keeps credentials out of what headroom prints. Errors can
// carry text a server sent back, and a server may echo the Authorization
// header it received: every error is redacted before it is logged, stored
// or written into a report.
package secret

import (
	"regexp"
	"strings"
)

// Mask replaces a secret in text.
const Mask = "<secret>"

// bearer matches a credential after an auth scheme, whoever's it is: a
// server may echo a header headroom did not send. The schemes are spelled
// as headers spell them and a credential has at least 8 characters, so
// prose ("the token limit", "basic auth") is left alone.
var bearer = regexp.MustCompile(`\b(Bearer|bearer|BEARER|Basic|Token)(\s+|%20)[A-Za-z0-9._~+/=:-]{8,}`)

// Redact masks every given secret (empty ones are skipped) and any
// credential that follows an auth scheme.
func Redact(text string, secrets ...string) string {
	for _, s := range secrets {
		if s != "" {
			text = strings.ReplaceAll(text, s, Mask)
		}
	}
	return bearer.ReplaceAllString(text, "${1}${2}"+Mask)
}

// Error returns err with its message redacted; errors.Is and errors.As still
// see the cause. nil stays nil.
func Error(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := Redact(err.Error(), secrets...)
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, cause: err}
}

type redacted struct {
	msg   string
	cause error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.cause }
