package sim

import "unicode"

// CountTokens is the simulator's tokenizer: deterministic and deliberately not
// whitespace-based (a word of n letters is ceil(n/3) tokens, each punctuation
// mark one more), so that prompt sizing is tested against a tokenizer that
// disagrees with word counts, as real BPE tokenizers do.
func CountTokens(text string) int {
	n, run := 0, 0
	flush := func() {
		n += (run + 2) / 3
		run = 0
	}
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			run++
		case unicode.IsSpace(r):
			flush()
		default:
			flush()
			n++
		}
	}
	flush()
	return n
}

// Chat template cost: a fixed preamble plus a header per message, as a chat
// template adds role markers around each message.
const (
	templateBase       = 7
	templatePerMessage = 4
)

// ChatTokens counts the prompt tokens of a chat request.
func ChatTokens(contents []string) int {
	n := templateBase
	for _, c := range contents {
		n += templatePerMessage + CountTokens(c)
	}
	return n
}
