package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// events reads a server-sent event stream as the SSE specification does: an
// event's data is its data: lines joined by newlines, and it ends at a
// blank line (or the end of the stream). Comments and other fields are
// skipped. Lines end in \n, or \r\n.
//
// It reads into one buffer and hands back an event's data as a slice of it
// when the event is one data line already followed by its blank line, as
// nearly every token chunk is: no copy and no line-by-line scanner for the
// stream's commonest case. The slice is valid until the next call.
type events struct {
	r       io.Reader
	buf     []byte // read so far; buf[pos:] not yet parsed
	pos     int
	data    []byte // the data lines of the event being read, joined
	eof     bool
	readErr error
	tooLong bool
	empty   int // reads in a row that returned nothing
}

func newEvents(body io.Reader) *events {
	return &events{r: body, buf: make([]byte, 0, 4<<10)} // grows for long lines; most are short
}

// errNoProgress: a reader that returns neither data nor an error, many times over.
var errNoProgress = errors.New("stream reader made no progress")

// fill reads more into the buffer, moving the unparsed part to its start.
func (e *events) fill() {
	if e.pos > 0 {
		n := copy(e.buf, e.buf[e.pos:])
		e.buf, e.pos = e.buf[:n], 0
	}
	if len(e.buf) == cap(e.buf) {
		e.buf = append(e.buf, make([]byte, len(e.buf))...)[:len(e.buf)]
	}
	n, err := e.r.Read(e.buf[len(e.buf):cap(e.buf)])
	e.buf = e.buf[:len(e.buf)+n]
	switch {
	case err != nil:
		e.eof = true
		if err != io.EOF {
			e.readErr = err
		}
	case n == 0:
		if e.empty++; e.empty > 100 {
			e.eof, e.readErr = true, errNoProgress
		}
	default:
		e.empty = 0
	}
}

// line returns the next line without its end; ok is false at the end of the
// stream. A last line with no end is a line. The slice is valid until the
// next call.
func (e *events) line() (line []byte, ok bool) {
	for {
		if i := bytes.IndexByte(e.buf[e.pos:], '\n'); i >= 0 {
			line = e.buf[e.pos : e.pos+i]
			e.pos += i + 1
			return bytes.TrimSuffix(line, []byte("\r")), true
		}
		if len(e.buf)-e.pos > maxLine {
			e.tooLong, e.eof = true, true
			return nil, false
		}
		if e.eof {
			if e.pos < len(e.buf) {
				line, e.pos = e.buf[e.pos:], len(e.buf)
				return bytes.TrimSuffix(line, []byte("\r")), true
			}
			return nil, false
		}
		e.fill()
	}
}

// blankNext consumes the blank line that ends an event when it is already
// buffered, and reports whether it was.
func (e *events) blankNext() bool {
	rest := e.buf[e.pos:]
	switch {
	case bytes.HasPrefix(rest, []byte("\n")):
		e.pos++
	case bytes.HasPrefix(rest, []byte("\r\n")):
		e.pos += 2
	default:
		return false
	}
	return true
}

// next returns the next event's data and when it was complete; ok is false
// at the end of the stream.
func (e *events) next() (data []byte, at time.Time, ok bool) {
	e.data = e.data[:0]
	has := false
	for {
		line, ok := e.line()
		if !ok {
			break
		}
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
		if !has && e.blankNext() {
			return value, time.Now(), true // one line, ended: no copy
		}
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

func (e *events) err() error {
	switch {
	case len(e.data) > maxLine:
		return fmt.Errorf("event longer than %d bytes", maxLine)
	case e.tooLong:
		return fmt.Errorf("line longer than %d bytes", maxLine)
	}
	return e.readErr
}
