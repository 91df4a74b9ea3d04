package memnet_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/memnet"
)

// A request's body is written before the server reads it, as a socket's
// send buffer takes it: the time from the written request to the answer
// holds the server's wait before it read the body. On a bare pipe the
// write waited for the read, and a probe's clock hid the wait.
func TestWriteEndsBeforeThePeerReads(t *testing.T) {
	for _, size := range []int{10, 100 << 10, 2 << 20} {
		synctest.Test(t, func(t *testing.T) {
			ln, stop := memnet.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(time.Second)
				n, err := io.Copy(io.Discard, r.Body)
				if err != nil || n != int64(size) {
					t.Errorf("the server read %d bytes (%v), want %d", n, err, size)
				}
				_, _ = w.Write([]byte("ok"))
			}))
			defer stop()
			client := &http.Client{Transport: &http.Transport{DialContext: ln.Dial}}
			defer client.CloseIdleConnections()
			var wrote time.Time
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote = time.Now() }}
			req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "POST", "http://x/", bytes.NewReader(make([]byte, size)))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != "ok" {
				t.Fatalf("answer %q, %v", body, err)
			}
			if waited := time.Since(wrote); wrote.Sub(start) != 0 || waited != time.Second {
				t.Errorf("%d bytes: written after %s, answered %s later; want written at once and the server's 1s after", size, wrote.Sub(start), waited)
			}
		})
	}
}

// What an end wrote before it closed reaches the peer, as TCP delivers its
// send buffer before the connection ends; and a read under way when its own
// end closes ends at once.
func TestCloseDeliversWhatWasWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := memnet.Listen()
		defer ln.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := ln.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.Write([]byte("last words")); err != nil {
				t.Error(err)
			}
			c.Close()
		}()
		c, err := ln.Dial(t.Context(), "tcp", "x")
		if err != nil {
			t.Fatal(err)
		}
		<-done
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "last words" {
			t.Errorf("read %q, %v after the peer closed; want its last words and EOF", got, err)
		}
		c.Close()

		c, peer := connect(t, ln)
		defer peer.Close()
		read := make(chan error)
		go func() {
			_, err := c.Read(make([]byte, 1))
			read <- err
		}()
		synctest.Wait()
		c.Close()
		if err := <-read; err == nil {
			t.Error("a read under way went on after its end closed")
		}
	})
}

// Two ends that each wrote and closed without reading end their pumps, as
// two sockets closed at once do: a TLS connection shut down from both sides
// sends a close_notify each way, and neither side reads it. Before, each
// pump waited for the other to read, and the test's bubble deadlocked.
func TestBothEndsCloseUnread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := memnet.Listen()
		defer ln.Close()
		c, peer := connect(t, ln)
		for _, end := range []net.Conn{c, peer} {
			if _, err := end.Write([]byte("close_notify")); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		c.Close()
		peer.Close()
		// synctest.Test fails the test if a pump is still blocked here.
	})
}

// connect dials ln and returns both ends: the dialed one and the one ln
// accepted.
func connect(t *testing.T, ln *memnet.Listener) (c, peer net.Conn) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		peer, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- peer
	}()
	c, err := ln.Dial(t.Context(), "tcp", "x")
	if err != nil {
		t.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		t.Fatal("the listener accepted nothing")
	}
	return c, peer
}
