package memnet

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// sendBuffer is how many bytes an end holds for its peer before a write
// waits: 4 MB, a kernel's largest TCP send buffer by default (tcp_wmem).
// It is allocated as it fills, so an idle connection costs nothing.
const sendBuffer = 4 << 20

// conn is one end of a net.Pipe whose writes are queued as a socket's send
// buffer holds them. A bare pipe's write ends only when the peer reads it:
// a server that held a request back before reading its body held the
// client's write, and the probe's clock, which starts once the request is
// written, did not start until the server let it go. Over TCP the kernel
// takes the body and the wait shows in the time to first token.
type conn struct {
	net.Conn // the pipe's end: reads, read deadlines, addresses
	peer     *conn

	wake    chan struct{} // the pump's: bytes were queued
	room    chan struct{} // the writers': the pump took the queue
	closing chan struct{} // closed by Close
	broken  chan struct{} // closed once the pump has stopped: nothing more is delivered
	once    sync.Once

	mu            sync.Mutex
	queue         []byte
	writeDeadline time.Time
}

// buffered wraps both ends of a pipe; the pump each starts stops once its
// end is closed and its queue delivered, or the peer's pipe end has closed.
func buffered(client, server net.Conn) (*conn, *conn) {
	wrap := func(c net.Conn) *conn {
		return &conn{Conn: c, wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
			closing: make(chan struct{}), broken: make(chan struct{})}
	}
	c, s := wrap(client), wrap(server)
	c.peer, s.peer = s, c
	go c.pump()
	go s.pump()
	return c, s
}

// take empties the queue and returns what it held.
func (b *conn) take() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.queue
	b.queue = nil
	return p
}

// pump writes the queued bytes into the pipe in order. Once the end is
// closed it delivers what was queued before, as TCP sends its buffer
// before its FIN, and then closes the pipe.
func (b *conn) pump() {
	defer close(b.broken)
	defer b.Conn.Close()
	for {
		if p := b.take(); len(p) > 0 {
			signal(b.room)
			if _, err := b.Conn.Write(p); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
			// A deadline is the peer's Close: what it will never read is
			// dropped, as its kernel would, and this end still reads.
			continue
		}
		select {
		case <-b.wake:
		case <-b.closing:
			if p := b.take(); len(p) > 0 {
				_, _ = b.Conn.Write(p)
			}
			return
		}
	}
}

// signal wakes the one waiting on c, if any, or the next to wait.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Write queues a copy of p and returns, unless the queue is full: then it
// waits for the pump to take it, for the write deadline, or for either end
// to close.
func (b *conn) Write(p []byte) (int, error) {
	var expired <-chan time.Time
	for {
		select {
		case <-b.closing:
			return 0, net.ErrClosed
		case <-b.broken:
			return 0, io.ErrClosedPipe
		default:
		}
		b.mu.Lock()
		if len(b.queue) < sendBuffer {
			b.queue = append(b.queue, p...)
			b.mu.Unlock()
			signal(b.wake)
			return len(p), nil
		}
		deadline := b.writeDeadline
		b.mu.Unlock()
		if expired == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-b.room:
		case <-b.closing:
		case <-b.broken:
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// Read reads from the pipe; after Close it fails as a closed socket does.
func (b *conn) Read(p []byte) (int, error) {
	select {
	case <-b.closing:
		return 0, net.ErrClosed
	default:
	}
	n, err := b.Conn.Read(p)
	if err != nil {
		select {
		case <-b.closing:
			return n, net.ErrClosed
		default:
		}
	}
	return n, err
}

// Close stops reads and writes at once; the pipe itself closes once the
// queue is delivered.
func (b *conn) Close() error {
	b.once.Do(func() {
		close(b.closing)
		// A past deadline ends a read under way now.
		_ = b.Conn.SetReadDeadline(time.Unix(1, 0))
		// Nothing reads this end any more, so the peer's pump must not wait
		// for it: were both ends closed with bytes each way, each pump would
		// wait for the other. Only Close sets the pipe's write deadline;
		// SetWriteDeadline bounds the wait for room in the queue.
		_ = b.peer.Conn.SetWriteDeadline(time.Unix(1, 0))
	})
	return nil
}

// SetDeadline implements net.Conn: the write deadline bounds a wait for
// room in the queue, never the delivery of what is queued.
func (b *conn) SetDeadline(t time.Time) error {
	_ = b.SetWriteDeadline(t)
	return b.Conn.SetReadDeadline(t)
}

// SetWriteDeadline implements net.Conn.
func (b *conn) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	b.writeDeadline = t
	b.mu.Unlock()
	return nil
}
