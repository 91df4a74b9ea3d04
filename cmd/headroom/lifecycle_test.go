package main

import (
	"net"
	"testing"
	"time"
)

// With its port taken, serve exits non-zero at once, before probing: it
// used to log the bind error and run on.
func TestServePortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := writeConfig(t, "", "targets: [{name: a, url: 'http://127.0.0.1:1'}]\npower: {source: none}\n")
	done := make(chan int, 1)
	start := time.Now()
	go func() {
		done <- run([]string{"serve", "--config.file", file, "--web.listen-address", l.Addr().String()})
	}()
	select {
	case code := <-done:
		t.Logf("exited %d after %s", code, time.Since(start))
		if code == 0 {
			t.Error("serve with its port taken exited 0")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve with its port taken still runs after 10 s")
	}
}
