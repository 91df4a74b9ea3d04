package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Fleet is many simulated servers behind one listener, for trying
// discovery and sharding at scale without a port per server: /s17/... is
// server s17, an engine of its own, started at its first request. /targets
// lists them in http_sd's format, each with its name and URL as the labels
// headroom's relabeling reads (target, __url__).
type Fleet struct {
	ctx     context.Context
	profile Profile
	scale   float64
	style   string
	n       int

	mu       sync.Mutex
	wg       sync.WaitGroup
	servers  map[string]*Server
	requests map[string]int
}

// NewFleet serves n servers of profile p until ctx ends; Wait waits for
// their engines to stop.
func NewFleet(ctx context.Context, p Profile, timeScale float64, metricsStyle string, n int) *Fleet {
	return &Fleet{ctx: ctx, profile: p, scale: timeScale, style: metricsStyle, n: n, servers: map[string]*Server{}, requests: map[string]int{}}
}

// Wait returns once every engine started has stopped.
func (f *Fleet) Wait() { f.wg.Wait() }

// Requests is how many completion requests the named server has received.
func (f *Fleet) Requests(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[name]
}

func (f *Fleet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/targets" {
		f.targets(w, r)
		return
	}
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s := f.server(name, strings.HasSuffix(rest, "completions"))
	if s == nil {
		http.NotFound(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + rest
	s.Handler().ServeHTTP(w, r2)
}

// server is the named server, started on first use; nil for no such name.
func (f *Fleet) server(name string, completion bool) *Server {
	i, err := strconv.Atoi(strings.TrimPrefix(name, "s"))
	if !strings.HasPrefix(name, "s") || err != nil || i < 0 || i >= f.n || name != fmt.Sprintf("s%d", i) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if completion {
		f.requests[name]++
	}
	s, ok := f.servers[name]
	if !ok {
		s = NewServer(f.profile, f.scale, f.style)
		f.servers[name] = s
		f.wg.Go(func() { s.Run(f.ctx) })
	}
	return s
}

type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

func (f *Fleet) targets(w http.ResponseWriter, r *http.Request) {
	groups := make([]sdGroup, f.n)
	for i := range groups {
		name := fmt.Sprintf("s%d", i)
		groups[i] = sdGroup{Targets: []string{r.Host}, Labels: map[string]string{"target": name, "__url__": "http://" + r.Host + "/" + name}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(groups)
}
