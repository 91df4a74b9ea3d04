// Package secret keeps credentials out of what headroom prints. Errors can
// carry text a server sent back, and a server may echo the Authorization
// header it received: every error is redacted before it is logged, stored
// or written into a report.
package secret

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Mask replaces a secret in text.
const Mask = "<secret>"

// credential is the run of characters a credential after an auth scheme is
// made of.
const credential = `[A-Za-z0-9._~+/=:-]`

// bearer matches a credential after an auth scheme, whoever's it is: a
// server may echo a header headroom did not send. The schemes are spelled
// as headers spell them and a credential has at least 8 characters, so
// prose ("the token limit", "basic auth") is left alone.
var bearer = regexp.MustCompile(`\b(Bearer|bearer|BEARER|Basic|Token)(\s+|%20)` + credential + `{8,}`)

// cutBearer matches what may be the start of a credential at the end of a
// text that was cut: after an auth scheme, any length is a prefix of one.
var cutBearer = regexp.MustCompile(`\b(Bearer|bearer|BEARER|Basic|Token)(\s+|%20)` + credential + `+$`)

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

// Truncate redacts text, then cuts it to at most n bytes (on a rune
// boundary) and marks the cut with "…". A secret whose first part is all
// that is left before the cut is masked too: redacting after a cut misses a
// secret that lost its last character, and the part left shows all but that.
func Truncate(text string, n int, secrets ...string) string {
	text = Redact(text, secrets...)
	if len(text) <= n {
		return text
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	text = text[:cut]
	for _, s := range secrets {
		// The longest prefix of s that ends the text: at most len(s)-1
		// bytes, a whole s being masked already.
		for k := min(len(s)-1, len(text)); k > 0; k-- {
			if strings.HasSuffix(text, s[:k]) {
				text = text[:len(text)-k] + Mask
				break
			}
		}
	}
	return cutBearer.ReplaceAllString(text, "${1}${2}"+Mask) + "…"
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
