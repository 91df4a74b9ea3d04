package monitor_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/collector"
	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/estimator"
	"github.com/headroom-dev/headroom/internal/memnet"
	"github.com/headroom-dev/headroom/internal/scripted"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/sim"
)

// tally passes every sample on to the capacity model, as the daemon does,
// and keeps each probe's TTFT by kind: a lone probe's or a burst's.
type tally struct {
	monitor.Recorder
	mu          sync.Mutex
	lone, burst []float64
	sent        map[time.Time]bool // each burst, by when it was sent
}

func (t *tally) Record(s monitor.Sample) {
	t.mu.Lock()
	if s.Burst > 0 {
		t.burst = append(t.burst, s.Result.TTFT.Seconds())
		t.sent[s.Time] = true
	} else {
		t.lone = append(t.lone, s.Result.TTFT.Seconds())
	}
	t.mu.Unlock()
	t.Recorder.Record(s)
}

// TestBurstsStayOutOfTheSLOSeries runs the shipped monitor and estimator
// with calibration at its defaults, for an hour of virtual time, against
// the simulator of report 000's server. The probe histograms and
// headroom_probes_total, which the SLO panels and burn-rate rules read,
// must hold the lone probes exactly; every burst's probes must be under
// headroom_calibration_* alone; and the capacity model must still get both.
func TestBurstsStayOutOfTheSLOSeries(t *testing.T) {
	prof, cfg := report000(t, `
targets: [{name: sim, url: 'http://sim'}]
scenarios: [{name: ctx-8k, input_tokens: 8192, output_tokens: 64}]
use_cases: [{name: chatbot, scenario: ctx-8k, ttft_max: 2s, decode_min_tps: 15}]
`)
	if !cfg.Calibration.Enabled {
		t.Fatal("calibration is off by default: nothing to test")
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := sim.NewServer(prof, 1, "vllm")
		ln, stop := memnet.Serve(srv.Handler())
		var wg sync.WaitGroup
		wg.Go(func() { srv.Run(ctx) })
		est := estimator.New(cfg, nil)
		rec := &tally{Recorder: est, sent: map[time.Time]bool{}}
		reg := prometheus.NewRegistry()
		mon := monitor.New(slog.New(slog.DiscardHandler), collector.NewProbes(reg, false), rec, est, monitor.WithDial(ln.Dial))
		mon.Apply(ctx, cfg)
		// The load the status reads is production's, none on this idle
		// server, through every burst.
		most := 0.0
		for range 3600 {
			time.Sleep(time.Second)
			for _, s := range mon.Status() {
				most = math.Max(most, s.Load.InFlight())
			}
		}
		mon.Stop() // every probe sent is recorded, or dropped from both
		cancel()
		stop()
		wg.Wait()

		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		page := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			page[mf.GetName()] = mf
		}
		histogram := func(name string) (count uint64, sum float64) {
			for _, m := range page[name].GetMetric() {
				count += m.GetHistogram().GetSampleCount()
				sum += m.GetHistogram().GetSampleSum()
			}
			return count, sum
		}
		counter := func(name, result string) (v float64) {
			for _, m := range page[name].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "result" && l.GetValue() == result {
						v += m.GetCounter().GetValue()
					}
				}
			}
			return v
		}
		total := func(vs []float64) (s float64) {
			for _, v := range vs {
				s += v
			}
			return s
		}
		var bursts float64
		for _, m := range page["headroom_calibration_bursts_total"].GetMetric() {
			bursts += m.GetCounter().GetValue()
		}
		t.Logf("%d lone probes (mean TTFT %.2f s), %d bursts of %d probes in all (mean TTFT %.2f s)",
			len(rec.lone), total(rec.lone)/float64(len(rec.lone)), len(rec.sent), len(rec.burst), total(rec.burst)/float64(len(rec.burst)))
		if len(rec.sent) < 2 || bursts != float64(len(rec.sent)) {
			t.Fatalf("%d bursts recorded, %v counted: want at least two, counted once each", len(rec.sent), bursts)
		}
		if len(rec.lone) == 0 {
			t.Fatal("no lone probe")
		}
		if most > 1 {
			t.Errorf("the status read a load of %v on an idle server: headroom's own probes counted as production", most)
		}
		for _, tc := range []struct {
			histogram, results string
			ttft               []float64
		}{
			{"headroom_probe_ttft_seconds", "headroom_probes_total", rec.lone},
			{"headroom_calibration_ttft_seconds", "headroom_calibration_probes_total", rec.burst},
		} {
			count, sum := histogram(tc.histogram)
			if count != uint64(len(tc.ttft)) || math.Abs(sum-total(tc.ttft)) > 1e-6*sum {
				t.Errorf("%s: %d probes summing %.6f s, want the %d recorded summing %.6f s", tc.histogram, count, sum, len(tc.ttft), total(tc.ttft))
			}
			if got := counter(tc.results, "success"); got != float64(len(tc.ttft)) {
				t.Errorf("%s{result=\"success\"} %v, want %d", tc.results, got, len(tc.ttft))
			}
		}
		for _, h := range []string{"headroom_probe_e2e_seconds", "headroom_probe_itl_seconds", "headroom_probe_decode_tokens_per_second"} {
			if count, _ := histogram(h); count != uint64(len(rec.lone)) {
				t.Errorf("%s: %d probes, want the %d lone ones", h, count, len(rec.lone))
			}
		}
		for _, h := range []string{"headroom_calibration_e2e_seconds", "headroom_calibration_itl_seconds", "headroom_calibration_decode_tokens_per_second"} {
			if count, _ := histogram(h); count != uint64(len(rec.burst)) {
				t.Errorf("%s: %d probes, want the bursts' %d", h, count, len(rec.burst))
			}
		}
	})
}

// stalling passes requests to a server, except that the first request of
// the first burst to arrive while two others are in flight waits stall
// before it is served: a burst's straggler, stalled by nothing its law
// counts.
type stalling struct {
	http.Handler
	stall    time.Duration
	mu       sync.Mutex
	inFlight int
	stalled  bool
}

func (s *stalling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/completions" && r.URL.Path != "/v1/chat/completions" {
		s.Handler.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.inFlight++
	stall := !s.stalled && s.inFlight == 3
	s.stalled = s.stalled || stall
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if stall {
		select {
		case <-time.After(s.stall):
		case <-r.Context().Done():
			return
		}
	}
	s.Handler.ServeHTTP(w, r)
}

// A burst's last probe, stalled past twice what the others took, is cut:
// it gives no measurement (it would be a stall no law counts) and bills the
// budget for twice the others' time, not for its own deadline. It stood in
// the burst all the same, and is recorded so (Lost), without a first token,
// so that the others keep their places in the prefill queue.
// The monitor and estimator run as shipped, with calibration's defaults,
// against a linear law.
func TestABurstsStragglerIsCut(t *testing.T) {
	cfg, err := config.Parse([]byte(`
targets: [{name: sim, url: 'http://sim'}]
scenarios: [{name: ctx-1k, input_tokens: 1024, output_tokens: 64}]
use_cases: [{name: chat, scenario: ctx-1k, ttft_max: 2s, decode_min_tps: 15}]
`))
	if err != nil {
		t.Fatal(err)
	}
	law := scripted.Families()[0].Draw(1)
	stall := 30 * time.Second // below the scenario's 37.4 s deadline
	synctest.Test(t, func(t *testing.T) {
		srv := scripted.NewServer(law, nil)
		h := &stalling{Handler: srv, stall: stall}
		est := estimator.New(cfg, nil)
		rec := &bursts{Recorder: est, sizes: map[time.Time]int{}, burst: map[time.Time]int{}, ends: map[time.Time]time.Time{}, lost: map[time.Time]int{}}
		var log strings.Builder
		var logMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&locked{w: &log, mu: &logMu}, nil))
		anHour(cfg, h, srv.Run, est, rec, logger)

		h.mu.Lock()
		stalled := h.stalled
		h.mu.Unlock()
		if !stalled {
			t.Fatal("no burst of three or more in the hour: nothing stalled")
		}
		logMu.Lock()
		text := log.String()
		logMu.Unlock()
		if !strings.Contains(text, "cut its last probe") {
			t.Errorf("no cut logged:\n%s", text)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		short := 0
		for sent, got := range rec.sizes {
			if got < rec.burst[sent] {
				short++
				if took := rec.ends[sent].Sub(sent); took > stall/2 {
					t.Errorf("the cut burst's probes ended %v after it was sent: a straggler's stall of %v was waited out", took, stall)
				}
				if lost := rec.lost[sent]; got+lost != rec.burst[sent] {
					t.Errorf("a burst of %d gave %d samples and %d lost: the cut probe left the burst", rec.burst[sent], got, lost)
				}
			}
		}
		if short != 1 {
			t.Errorf("%d bursts gave fewer samples than probes sent, want the stalled one alone (sizes %v, sent %v)", short, rec.sizes, rec.burst)
		}
	})
}

// anHour runs the shipped monitor, est its calibrator and rec its
// recorder, against h for an hour of virtual time, with the server's own
// loop (run) beside it: inside a synctest bubble.
func anHour(cfg *config.Config, h http.Handler, run func(context.Context), est *estimator.Estimator, rec monitor.Recorder, logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, stop := memnet.Serve(h)
	var wg sync.WaitGroup
	wg.Go(func() { run(ctx) })
	mon := monitor.New(logger, collector.NewProbes(prometheus.NewRegistry(), false), rec, est, monitor.WithDial(ln.Dial))
	mon.Apply(ctx, cfg)
	time.Sleep(time.Hour)
	mon.Stop()
	cancel()
	stop()
	wg.Wait()
}

// bursts counts each burst's samples, and when the last of them ended.
type bursts struct {
	monitor.Recorder
	mu    sync.Mutex
	sizes map[time.Time]int
	burst map[time.Time]int
	ends  map[time.Time]time.Time
	lost  map[time.Time]int // cut, with no first token (the stall held it before the server)
}

func (b *bursts) Record(s monitor.Sample) {
	if s.Lost {
		b.mu.Lock()
		if s.Result.TTFT == 0 {
			b.lost[s.Time]++
		}
		b.mu.Unlock()
	} else if s.Burst > 0 {
		b.mu.Lock()
		b.sizes[s.Time]++
		b.burst[s.Time] = s.Burst
		if end := s.Time.Add(s.Result.E2E); end.After(b.ends[s.Time]) {
			b.ends[s.Time] = end
		}
		b.mu.Unlock()
	}
	b.Recorder.Record(s)
}

// locked is a writer for a logger read while it writes.
type locked struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *locked) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// decodes keeps each burst's probes' decodes: when each began and ended,
// and the tokens it generated.
type decodes struct {
	monitor.Recorder
	mu     sync.Mutex
	bursts map[time.Time][]decodeSpan
}

type decodeSpan struct {
	from, to time.Duration
	tokens   int
}

func (d *decodes) Record(s monitor.Sample) {
	if s.Burst > 1 && !s.Lost {
		d.mu.Lock()
		d.bursts[s.Time] = append(d.bursts[s.Time], decodeSpan{s.Result.TTFT, s.Result.E2E, s.Result.CompletionTokens})
		d.mu.Unlock()
	}
	d.Recorder.Record(s)
}

// together is the most spans that run at once.
func together(spans []decodeSpan) int {
	most := 0
	for _, s := range spans {
		n := 0
		for _, o := range spans {
			if o.from <= s.from && s.from < o.to {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// On a server that prefills one prompt at a time, a burst of short probes
// decodes them one by one, and no burst measures the decode step at the
// batches a long chatbot's capacity lies at. Once a burst has shown how
// far apart its first tokens come, and the decode's reach is what holds
// the estimate back, the probes generate more tokens (up to the use case's
// 1024), so that half a burst decodes together. The monitor and estimator
// run as shipped, with calibration's defaults, for an hour of virtual time.
func TestABurstDecodesTogether(t *testing.T) {
	cfg, err := config.Parse([]byte(`
targets: [{name: sim, url: 'http://sim'}]
scenarios: [{name: ctx-8k, input_tokens: 8192, output_tokens: 32}]
use_cases: [{name: short-chatbot, scenario: ctx-8k, ttft_max: 10s, decode_min_tps: 10, output_tokens: 1024}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var law scripted.Law
	for _, f := range scripted.Families() {
		if f.Name == "fcfs-prefill" {
			law = f.Draw(1)
		}
	}
	if !law.SerialPrefill {
		t.Fatal("no one-prefill-at-a-time family")
	}
	synctest.Test(t, func(t *testing.T) {
		srv := scripted.NewServer(law, nil)
		est := estimator.New(cfg, nil)
		rec := &decodes{Recorder: est, bursts: map[time.Time][]decodeSpan{}}
		anHour(cfg, srv, srv.Run, est, rec, slog.New(slog.DiscardHandler))

		rec.mu.Lock()
		defer rec.mu.Unlock()
		lengthened := 0
		for sent, spans := range rec.bursts {
			n, tokens := len(spans), spans[0].tokens
			t.Logf("burst at %s: %d probes of %d tokens, %d decoding together at most", sent.Format("15:04:05"), n, tokens, together(spans))
			if tokens > 32 {
				lengthened++
				if got := together(spans); 3*got < n {
					t.Errorf("a burst of %d probes of %d tokens decoded at most %d together, want a third of it or more", n, tokens, got)
				}
			}
		}
		if lengthened == 0 {
			t.Errorf("no burst's probes generated more than the scenario's 32 tokens")
		}
	})
}
