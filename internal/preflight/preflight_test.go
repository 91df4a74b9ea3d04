package preflight

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/internal/scripted"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/sim"
)

// check-config --probe against headroom sim and against a llama.cpp-shaped
// server of a 16K context: each names its engine and context, and the
// default scenarios the llama.cpp one cannot take are named (issue 39).
func TestCheckTargets(t *testing.T) {
	s := sim.NewServer(sim.Tiny, 20, "vllm")
	go s.Run(t.Context())
	vllm := httptest.NewServer(s.Handler())
	defer vllm.Close()
	llama := httptest.NewServer(scripted.LlamaCpp(s.Handler(), 16384))
	defer llama.Close()
	down := httptest.NewServer(nil)
	down.Close() // nothing listens there any more

	cfg, err := config.Parse([]byte("targets:\n  - {name: sim, url: '" + vllm.URL + "'}\n  - {name: llama, url: '" + llama.URL + "'}\n  - {name: down, url: '" + down.URL + "'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		target      int
		want, never []string
		fails       bool
	}{
		{0, []string{"target sim:", "engine:    vllm", "context:   ", "(/v1/models max_model_len)", "tokenizer: vllm /tokenize", "request:   answered in"},
			[]string{"do not fit", "error:"}, false},
		{1, []string{"target llama:", "engine:    llamacpp", "context:   16384 tokens (/props n_ctx)", "tokenizer: llamacpp /tokenize", "request:   answered in",
			"scenarios that do not fit its context of 16384 tokens, and so fail every probe: ctx-32k (32768 + 32 tokens), ctx-64k (65536 + 32 tokens), ctx-96k (98304 + 32 tokens)"},
			[]string{"ctx-8k (", "error:"}, false},
		{2, []string{"target down:", "engine:    unknown (metrics page unreadable)", "request:   not answered", "error:     metrics page: scrape", "error:     models: list models"},
			nil, true},
	} {
		tgt := cfg.Targets[tc.target]
		r := Check(context.Background(), tgt, cfg.ScenariosOf(tgt), monitor.Clients)
		var b strings.Builder
		if err := r.Write(&b); err != nil {
			t.Fatal(err)
		}
		t.Logf("check-config --probe:\n%s", b.String())
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: report lacks %q:\n%s", tgt.Name, w, b.String())
			}
		}
		for _, w := range tc.never {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: report says %q:\n%s", tgt.Name, w, b.String())
			}
		}
		if (r.Err() != nil) != tc.fails {
			t.Errorf("%s: error %v, want one: %v", tgt.Name, r.Err(), tc.fails)
		}
	}
}
