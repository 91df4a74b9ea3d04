// Command streamserver serves internal/scripted.Stream on loopback: a chat
// server with scripted timings for scripts/client-bench.sh, which sets
// headroom bench's client against hey's on it.
//
//	go run ./scripts/streamserver -listen 127.0.0.1:18200 -ttft 100ms -itl 20ms
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/headroom-dev/headroom/internal/scripted"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18200", "address")
	ttft := flag.Duration("ttft", 100*time.Millisecond, "arrival to first token")
	itl := flag.Duration("itl", 20*time.Millisecond, "between tokens")
	flag.Parse()
	srv := &http.Server{Addr: *listen, Handler: &scripted.Stream{TTFT: *ttft, ITL: *itl}, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
