package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
	"time"
)

// scannerEvents is the line scanner events replaced, kept as the reading
// events must give.
type scannerEvents struct {
	sc   *bufio.Scanner
	data []byte
	eof  bool
}

func newScannerEvents(body io.Reader) *scannerEvents {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4<<10), maxLine) // grows for long lines; most are short
	return &scannerEvents{sc: sc}
}

// next returns the next event's data and when it was complete; ok is false
// at the end of the stream.
func (e *scannerEvents) next() (data []byte, at time.Time, ok bool) {
	e.data = e.data[:0]
	has := false
	for !e.eof {
		if !e.sc.Scan() {
			e.eof = true
			break
		}
		line := e.sc.Bytes()
		if len(line) == 0 {
			if has {
				return e.data, time.Now(), true
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue // comments (":..."), event:, id:, retry:
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if has {
			e.data = append(e.data, '\n')
		}
		e.data, has = append(e.data, value...), true
		if len(e.data) > maxLine {
			return nil, time.Time{}, false
		}
	}
	if has {
		return e.data, time.Now(), true
	}
	return nil, time.Time{}, false
}

func (e *scannerEvents) err() error {
	if len(e.data) > maxLine {
		return fmt.Errorf("event longer than %d bytes", maxLine)
	}
	return e.sc.Err()
}

// events reads every stream as the bufio.Scanner reader it replaced did,
// whatever sizes the stream arrives in.
func FuzzEvents(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "data: a\r\n\r\ndata: b\n\n", "event: x\ndata: a\ndata: b\n: c\n\n", "data: last", "\n\n\ndata:x\n", "data: a\r\ndata: b\r\n\r\n"} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		var r io.Reader = bytes.NewReader(stream)
		if chunk%3 == 1 {
			r = iotest.OneByteReader(r)
		} else if chunk%3 == 2 {
			r = iotest.HalfReader(r)
		}
		got, want := newEvents(r), newScannerEvents(bytes.NewReader(stream))
		for i := 0; ; i++ {
			g, _, gok := got.next()
			w, _, wok := want.next()
			if gok != wok || !bytes.Equal(g, w) {
				t.Fatalf("event %d of %q: got %q (%v), want %q (%v)", i, stream, g, gok, w, wok)
			}
			if !gok {
				break
			}
		}
		if (got.err() == nil) != (want.err() == nil) {
			t.Fatalf("%q: error %v, want %v", stream, got.err(), want.err())
		}
	})
}
