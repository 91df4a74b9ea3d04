package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// linearServer is an OpenAI-compatible server whose TTFT and ITL are linear in
// its load (background requests plus those in flight), known exactly.
type linearServer struct {
	bg, inflight atomic.Int64
}

func (s *linearServer) load() int64 { return s.bg.Load() + s.inflight.Load() }

func (s *linearServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
	case "/tokenize":
		var q struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&q)
		n := 0
		for _, m := range q.Messages {
			n += len(strings.Fields(m.Content)) + 3
		}
		fmt.Fprintf(w, `{"count":%d}`, n)
	case "/metrics":
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} %d\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 0\n", s.load())
	case "/v1/chat/completions":
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		start := time.Now()
		load := float64(s.load())
		ttft := time.Duration((20 + 10*load) * float64(time.Millisecond))
		itl := time.Duration((2 + 1*load) * float64(time.Millisecond))
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range 8 {
			time.Sleep(time.Until(start.Add(ttft + time.Duration(i)*itl)))
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x \"}}]}\n\n")
			fl.Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":64,\"completion_tokens\":8}}\n\ndata: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

func TestCapacityOverHTTP(t *testing.T) {
	ls := &linearServer{}
	srv := httptest.NewServer(ls)
	defer srv.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Go(func() { // background load steps through 0..9 requests
		for i := 0; ; i++ {
			ls.bg.Store(int64(i % 10))
			select {
			case <-ctx.Done():
				return
			case <-time.After(1500 * time.Millisecond):
			}
		}
	})
	// TTFT reaches 85 ms at load 6.5; ITL reaches 10.5 ms at load 8.5.
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "targets:\n  - name: lin\n    url: %s\n    engine: vllm\nprobe_budget: 0.5\nengine_scrape_interval: 100ms\nscenarios:\n", srv.URL)
	for i := range 3 {
		fmt.Fprintf(&cfg, "  - {name: s%d, input_tokens: 64, output_tokens: 8, interval: 1s}\n", i)
	}
	cfg.WriteString("use_cases:\n")
	for i := range 3 {
		fmt.Fprintf(&cfg, "  - {name: u%d, scenario: s%d, statistic: p50, ttft_max: 85ms, itl_max: 10500us}\n", i, i)
	}
	cfgFile := filepath.Join(t.TempDir(), "headroom.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startDaemon(t, cfgFile)

	type status struct {
		Estimates []struct {
			UseCase  string   `json:"use_case"`
			Capacity *float64 `json:"capacity"`
			Samples  int      `json:"samples"`
			Why      string   `json:"why"`
		} `json:"estimates"`
	}
	var st status
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(base + "/api/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		st = status{}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		enough := len(st.Estimates) == 3
		for _, e := range st.Estimates {
			enough = enough && e.Samples >= 25
		}
		if enough {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not enough samples in time: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, e := range st.Estimates {
		if e.Capacity == nil || math.Abs(*e.Capacity-6.5) > 0.5 {
			t.Errorf("%s: capacity %v from %d samples (%s), want 6.5 ± 0.5", e.UseCase, e.Capacity, e.Samples, e.Why)
		}
	}
	m := scrape(t, base)
	if v, ok := m[`headroom_capacity_requests{target=lin,use_case=u0}`]; !ok || math.Abs(v-6.5) > 0.5 {
		t.Errorf("headroom_capacity_requests = %v", v)
	}
	if v := m[`headroom_slo_threshold{slo=ttft_seconds,use_case=u0}`]; v != 0.085 {
		t.Errorf("headroom_slo_threshold ttft = %v", v)
	}
	if _, ok := m[`headroom_ratio{target=lin,use_case=u0}`]; !ok {
		t.Error("headroom_ratio missing")
	}
}
