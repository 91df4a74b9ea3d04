package probe

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// filler words: common English words most tokenizers keep whole, so the token
// count per word is nearly constant and prompt sizing converges fast.
var filler = strings.Fields(`the system will measure how long each request waits before the first
token arrives and how fast the rest of the answer streams back to the user while other requests
share the same accelerator memory bandwidth and compute time under load from production traffic
every probe sends a prompt of known length then reads each chunk as it comes`)

// PromptText builds a prompt of words filler words. A non-empty nonce goes first
// so that no prefix cache can serve a cold prompt; warm prompts pass "".
func PromptText(nonce string, words int) string {
	var b strings.Builder
	b.Grow(words*7 + len(nonce) + 64)
	if nonce != "" {
		b.WriteString("[probe ")
		b.WriteString(nonce)
		b.WriteString("] ")
	}
	b.WriteString("Continue this text:")
	// Cycling through the list keeps tokens per word nearly constant at any
	// length, so a fit on short prompts extrapolates to long ones.
	for i := range words {
		b.WriteByte(' ')
		b.WriteString(filler[i%len(filler)])
	}
	return b.String()
}

// Nonce returns 12 random hex characters.
func Nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
