// Package memnet is an in-memory network: a listener whose connections are
// net.Pipe pairs with a send buffer at each end (conn.go). Tests serve an
// http.Handler on it and hand its Dial to a client, so that a whole HTTP
// exchange runs inside a testing/synctest bubble, where time is virtual and
// a blocked pipe lets the clock move on.
// A Network holds many listeners, each at its own address, and routes a
// dial by address: a daemon with many targets reaches each of them.
package memnet

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// Listener accepts the connections its Dial makes.
type Listener struct {
	addr   addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	bare   bool // connections without send buffers
}

// Listen returns a listener with nothing connected yet.
func Listen() *Listener { return listen("memnet") }

// ListenBare returns a listener whose connections are bare pipes: a write
// ends only when the peer has read it, so that a server's handler can see
// how much of its answer a client has taken.
func ListenBare() *Listener {
	l := Listen()
	l.bare = true
	return l
}

func listen(a string) *Listener {
	return &Listener{addr: addr(a), conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr implements net.Listener: the address it was made at.
func (l *Listener) Addr() net.Addr { return l.addr }

// Dial connects to the listener whatever the address: it has the signature
// of net.Dialer.DialContext.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	if !l.bare {
		client, server = buffered(client, server)
	}
	var err error
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		err = refused(l.addr.String())
	case <-ctx.Done():
		err = ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, err
}

// Network routes dials by address to the listeners made on it.
type Network struct {
	mu sync.Mutex
	ls map[string]*Listener
}

// Listen returns a listener at address (host:port), replacing any earlier
// one there.
func (n *Network) Listen(address string) *Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ls == nil {
		n.ls = map[string]*Listener{}
	}
	l := listen(address)
	n.ls[address] = l
	return l
}

// Dial connects to the listener at address, as net.Dialer.DialContext:
// where there is none, or it is closed, the connection is refused.
func (n *Network) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	l := n.ls[address]
	n.mu.Unlock()
	if l == nil {
		return nil, refused(address)
	}
	return l.Dial(ctx, network, address)
}

// refused is the error a dial to a port with no listener gets on a real
// network, so that callers classify it as they would there.
func refused(address string) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: addr(address), Err: syscall.ECONNREFUSED}
}

type addr string

func (addr) Network() string  { return "memnet" }
func (a addr) String() string { return string(a) }

// Serve serves h on a new Listener, as a test's server does; stop closes
// the server and the listener and returns once the server has. The setup
// and teardown every test over memnet shares.
func Serve(h http.Handler) (l *Listener, stop func()) {
	l = Listen()
	hs := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	return l, func() {
		_ = hs.Close()
		_ = l.Close()
		<-done
	}
}
