package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// countReaders are tokenCount's readers: a tokenize answer for a 96K-token
// prompt lists 96K ids, and decoding them element by element was most of
// what a probe allocated.
var countReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// maxDepth bounds the nesting tokenCount follows: a tokenize answer nests two
// or three deep.
const maxDepth = 64

// tokenCount reads a tokenize answer, {"count": N}, {"tokens": [...]} or
// TGI's bare array, and counts its tokens without decoding them: it scans
// the JSON for the elements of the one array that matters. A count wins
// over the tokens' length where both are given, as vLLM and SGLang give.
func tokenCount(r io.Reader) (int, error) {
	br := countReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		countReaders.Put(br)
	}()
	s := &scanner{r: br}
	n, err := s.answer()
	if err != nil {
		return 0, err
	}
	if c, err := s.next(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %q after the answer", c)
		}
		return 0, err
	}
	return n, nil
}

type scanner struct {
	r   *bufio.Reader
	key []byte // the object key last read, reused
}

var errNoCount = errors.New("no count or tokens in the answer")

func (s *scanner) answer() (int, error) {
	c, err := s.next()
	if err != nil {
		return 0, syntax(err)
	}
	switch c {
	case '[':
		return s.elements(0)
	case '{':
	default:
		return 0, fmt.Errorf("the answer is no JSON array or object: it starts with %q", c)
	}
	count, tokens := -1, -1
	for first := true; ; first = false {
		c, err := s.next()
		if err != nil {
			return 0, syntax(err)
		}
		if c == '}' && first {
			break
		}
		if c != '"' {
			return 0, fmt.Errorf("an object key starts with %q", c)
		}
		if err := s.readKey(); err != nil {
			return 0, err
		}
		if err := s.expect(':'); err != nil {
			return 0, err
		}
		// Keys match as encoding/json matches them, case aside.
		switch {
		case bytes.EqualFold(s.key, []byte("count")):
			if count, err = s.integer(); err != nil {
				return 0, fmt.Errorf("count: %w", err)
			}
		case bytes.EqualFold(s.key, []byte("tokens")):
			c, err := s.next()
			if err != nil {
				return 0, syntax(err)
			}
			if c == '[' {
				if tokens, err = s.elements(1); err != nil {
					return 0, err
				}
			} else if err := s.skipFrom(c, 1); err != nil {
				return 0, err
			}
		default:
			if err := s.skip(1); err != nil {
				return 0, err
			}
		}
		c, err = s.next()
		if err != nil {
			return 0, syntax(err)
		}
		if c == '}' {
			break
		}
		if c != ',' {
			return 0, fmt.Errorf("unexpected %q in an object", c)
		}
	}
	switch {
	case count >= 0:
		return count, nil
	case tokens >= 0:
		return tokens, nil
	}
	return 0, errNoCount
}

// elements counts an array's elements, its '[' read, at nesting depth.
func (s *scanner) elements(depth int) (int, error) {
	n := 0
	for {
		c, err := s.next()
		if err != nil {
			return 0, syntax(err)
		}
		if c == ']' && n == 0 {
			return 0, nil
		}
		if err := s.skipFrom(c, depth+1); err != nil {
			return 0, err
		}
		n++
		if c, err = s.next(); err != nil {
			return 0, syntax(err)
		}
		switch c {
		case ']':
			return n, nil
		case ',':
		default:
			return 0, fmt.Errorf("unexpected %q in an array", c)
		}
	}
}

// skip passes over one value.
func (s *scanner) skip(depth int) error {
	c, err := s.next()
	if err != nil {
		return syntax(err)
	}
	return s.skipFrom(c, depth)
}

// skipFrom passes over the value that begins with c.
func (s *scanner) skipFrom(c byte, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch c {
	case '"':
		return s.skipString()
	case '[':
		_, err := s.elements(depth)
		return err
	case '{':
		for first := true; ; first = false {
			c, err := s.next()
			if err != nil {
				return syntax(err)
			}
			if c == '}' && first {
				return nil
			}
			if c != '"' {
				return fmt.Errorf("an object key starts with %q", c)
			}
			if err := s.skipString(); err != nil {
				return err
			}
			if err := s.expect(':'); err != nil {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if c, err = s.next(); err != nil {
				return syntax(err)
			}
			if c == '}' {
				return nil
			}
			if c != ',' {
				return fmt.Errorf("unexpected %q in an object", c)
			}
		}
	}
	if !literal(c) {
		return fmt.Errorf("a value starts with %q", c)
	}
	for {
		b, err := s.r.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !literal(b) {
			return s.r.UnreadByte()
		}
	}
}

// literal: a byte of a number, true, false or null.
func literal(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}

// integer reads a non-negative integer value; null is -1, no count.
func (s *scanner) integer() (int, error) {
	c, err := s.next()
	if err != nil {
		return 0, syntax(err)
	}
	var digits [20]byte
	n := 0
	for ; literal(c); n++ {
		if n == len(digits) {
			return 0, errors.New("number too long")
		}
		digits[n] = c
		if c, err = s.r.ReadByte(); err != nil {
			break
		}
	}
	if err == nil {
		_ = s.r.UnreadByte()
	} else if err != io.EOF {
		return 0, err
	}
	if string(digits[:n]) == "null" {
		return -1, nil
	}
	v, perr := strconv.Atoi(string(digits[:n]))
	if perr != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a count", digits[:n])
	}
	return v, nil
}

// readKey reads a string, its '"' read, into s.key; keys of more than 64
// bytes are no key tokenCount looks for and are kept cut.
func (s *scanner) readKey() error {
	s.key = s.key[:0]
	return s.readString(true)
}

// skipString passes over a string, its '"' read.
func (s *scanner) skipString() error { return s.readString(false) }

// readString reads a string to its closing '"', its first read, keeping it
// in s.key when keep.
func (s *scanner) readString(keep bool) error {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return syntax(err)
		}
		switch c {
		case '"':
			return nil
		case '\\':
			if _, err := s.r.ReadByte(); err != nil {
				return syntax(err)
			}
			c = 0 // an escaped key is none tokenCount looks for
		}
		if keep && len(s.key) < 64 {
			s.key = append(s.key, c)
		}
	}
}

func (s *scanner) expect(want byte) error {
	c, err := s.next()
	if err != nil {
		return syntax(err)
	}
	if c != want {
		return fmt.Errorf("unexpected %q, want %q", c, want)
	}
	return nil
}

// next is the next byte that is not white space.
func (s *scanner) next() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// syntax names an answer cut short as such.
func syntax(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
