package probe

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// shape is a content chunk the full decoder read, with its content cut out.
// A server's token chunks differ from one another only in the content (the
// id, model and creation time stay), so a chunk that is the shape's prefix, a
// plain string and the shape's suffix is read without encoding/json's
// reflection, the client's largest cost per chunk after the read itself. Any
// other chunk goes to the decoder; FuzzShape holds the two to the same reading.
type shape struct{ prefix, suffix []byte }

// learn cuts the content out of a chunk the decoder read as one choice whose
// delta carries a plain content and nothing else: no finish reason, usage or
// error. ok is false for any other chunk.
func learn(data []byte, c *streamChunk) (s shape, ok bool) {
	if len(c.Choices) != 1 || c.Usage != nil || len(c.Error) > 0 && string(c.Error) != "null" || c.Object == "error" || c.Message != "" {
		return shape{}, false
	}
	ch := c.Choices[0]
	if ch.Text != "" || ch.Delta.ReasoningContent != "" || ch.Delta.Reasoning != "" || ch.FinishReason != nil && *ch.FinishReason != "" ||
		!plain([]byte(ch.Delta.Content)) || ch.Delta.Content == "" {
		return shape{}, false
	}
	key := append(append([]byte(`"content":"`), ch.Delta.Content...), '"')
	if bytes.Count(data, key) != 1 {
		return shape{}, false
	}
	i := bytes.Index(data, key)
	s = shape{prefix: bytes.Clone(data[:i+len(`"content":"`)]), suffix: bytes.Clone(data[i+len(key)-1:])}
	// Prove the cut is the content the decoder reads: another content in
	// its place must come back as that content.
	var probe streamChunk
	if json.Unmarshal(append(append(bytes.Clone(s.prefix), "zq"...), s.suffix...), &probe) != nil ||
		len(probe.Choices) != 1 || probe.Choices[0].Delta.Content != "zq" {
		return shape{}, false
	}
	return s, true
}

// content reads a chunk of the shape: its content, and true; false when the
// chunk is of another shape.
func (s shape) content(data []byte) ([]byte, bool) {
	if s.prefix == nil || len(data) < len(s.prefix)+len(s.suffix) || !bytes.HasPrefix(data, s.prefix) || !bytes.HasSuffix(data, s.suffix) {
		return nil, false
	}
	c := data[len(s.prefix) : len(data)-len(s.suffix)]
	if !plain(c) {
		return nil, false
	}
	return c, true
}

// plain: a JSON string body that decodes to itself: valid UTF-8 with no
// quote, backslash or control character.
func plain(b []byte) bool {
	for _, c := range b {
		if c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}
