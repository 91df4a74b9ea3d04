package bench

import (
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// simEvery serves the tiny simulator as serve does, handing every nth
// completion request to odd first; odd reports whether it answered the
// request itself. The count is of completions so far.
func simEvery(t *testing.T, n int64, odd func(http.ResponseWriter) bool) (target, *atomic.Int64) {
	t.Helper()
	var completions atomic.Int64
	sim := simHandler(t, "tiny", 1)
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/completions") && completions.Add(1)%n == 0 && odd(w) {
			return
		}
		sim.ServeHTTP(w, r)
	})), &completions
}

func TestArrivals(t *testing.T) {
	k := Key{Mode: "rate", Context: 1024, Output: 128, Rate: 4}
	even := arrivals(Constant, 4, 5, 1, k)
	for i, at := range even {
		if want := time.Duration(i) * 250 * time.Millisecond; at != want {
			t.Errorf("constant arrival %d at %s, want %s", i, at, want)
		}
	}
	const n = 20000
	p := arrivals(Poisson, 4, n, 1, k)
	if gap := p[n-1].Seconds() / (n - 1); math.Abs(gap-0.25)/0.25 > 0.02 {
		t.Errorf("Poisson mean gap %.4f s over %d arrivals, want 0.25 within 2%%", gap, n)
	}
	if again := arrivals(Poisson, 4, n, 1, k); again[n-1] != p[n-1] {
		t.Error("the same seed and cell gave another schedule")
	}
	other := k
	other.Context = 2048
	if arrivals(Poisson, 4, n, 1, other)[10] == p[10] {
		t.Error("two cells share one schedule")
	}
}

// Open loop against a server whose every fourth completion starts 200 ms
// late: the sends hold the asked rate within 5%, the requests in flight
// follow from the latencies, and the goodput of a 100 ms TTFT threshold is
// the share of requests the server did not delay.
func TestOpenLoopHoldsRate(t *testing.T) {
	for _, arrival := range []string{Constant, Poisson} {
		t.Run(arrival, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tg, _ := simEvery(t, 4, func(http.ResponseWriter) bool {
					time.Sleep(200 * time.Millisecond)
					return false
				})
				u := UseCase{Name: "u", Context: 256, Output: 16, Statistic: "mean", TTFTMax: 0.1}
				rep := newReport(Plan{Contexts: []int{256}, Output: 16, Rates: []float64{20}, Arrival: arrival, Seed: 7, RequestsPerCell: 100, UseCases: []UseCase{u}})
				if err := newRunner(tg).Run(t.Context(), rep); err != nil {
					t.Fatal(err)
				}
				rep = roundTrip(t, rep)
				c, ok := rep.Cell(Key{Mode: "rate", Context: 256, Output: 16, Rate: 20})
				if !ok || c.Rate == nil {
					t.Fatalf("no open-loop cell at 20/s in %+v", rep.Cells)
				}
				// Poisson's own schedule is the target: its sample rate over 100
				// arrivals is not exactly the asked rate.
				want := 20.0
				if arrival == Poisson {
					at := arrivals(Poisson, 20, 100, 7, c.Key)
					want = 99 / at[99].Seconds()
				}
				if got := c.Rate.Achieved; math.Abs(got-want)/want > 0.05 {
					t.Errorf("achieved %.2f requests/s, want %.2f within 5%%", got, want)
				}
				if len(c.Requests) != 100 || c.SuccessRate != 1 {
					t.Fatalf("%d requests, success %.2f", len(c.Requests), c.SuccessRate)
				}
				// The 25 the server delayed took 200 ms or more; in virtual time
				// the others took the simulator's few milliseconds, however busy
				// the machine: the goodput is the 75 not delayed.
				slow, met := 0, 0
				for _, q := range c.Requests {
					if q.TTFT >= 0.2 {
						slow++
					}
					if q.TTFT <= 0.1 {
						met++
					}
				}
				if slow != 25 || met != 75 {
					t.Errorf("%d requests took 200 ms or more to their first token and %d met 100 ms, want the 25 the server delayed and the 75 it did not", slow, met)
				}
				if got := c.Goodput["u"]; got != 0.75 {
					t.Errorf("goodput %.2f, want the 75 of 100 requests that met the 100 ms TTFT", got)
				}

				// Little's law: 20/s x the mean latency.
				var e2e float64
				for _, q := range c.Requests {
					e2e += q.E2E
				}
				if want := 20 * e2e / 100; math.Abs(c.Rate.InFlightMean-want)/want > 0.25 {
					t.Errorf("mean in flight %.2f, want about %.2f (rate x mean latency)", c.Rate.InFlightMean, want)
				}
				if c.Rate.InFlightMax < 2 {
					t.Errorf("at most %d in flight: a 200 ms request at 20/s overlaps the next", c.Rate.InFlightMax)
				}
			})
		})
	}
}

// A cell lasts until its last request returned, failed or not: its duration
// (and the throughput and power over it) counts a slow failure.
func TestFailuresCountInDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg, _ := simEvery(t, 2, func(w http.ResponseWriter) bool {
			time.Sleep(400 * time.Millisecond)
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
			return true
		})
		rep := newReport(Plan{Contexts: []int{256}, Concurrency: []int{2}, Output: 8, RequestsPerCell: 4})
		if err := newRunner(tg).Run(t.Context(), rep); err != nil {
			t.Fatal(err)
		}
		c := rep.Cells[0]
		if c.Failures["http_error"] == 0 {
			t.Fatalf("failures %v, want the server's 503s", c.Failures)
		}
		if c.Duration < 0.4 {
			t.Errorf("cell duration %.3f s, shorter than the 0.4 s failures it waited for", c.Duration)
		}
	})
}

// Past the cap on requests in flight a send waits for one to end: the server
// never holds more, and the report counts the sends held back.
func TestOpenLoopCapsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg, _ := simEvery(t, 1, func(http.ResponseWriter) bool {
			time.Sleep(200 * time.Millisecond)
			return false
		})
		rep := newReport(Plan{Contexts: []int{256}, Output: 8, Rates: []float64{50}, Arrival: Constant, RequestsPerCell: 20, MaxInFlight: 2})
		if err := newRunner(tg).Run(t.Context(), rep); err != nil {
			t.Fatal(err)
		}
		c := rep.Cells[0]
		if c.Rate.InFlightMax > 2 || c.Rate.Held == 0 || len(c.Requests) != 20 {
			t.Errorf("at most %d in flight, %d sends held, %d requests; want 2 at most, some held, all 20 done", c.Rate.InFlightMax, c.Rate.Held, len(c.Requests))
		}
		if c.Rate.Achieved > 25 {
			t.Errorf("achieved %.1f requests/s with 2 slots of 200 ms: the cap did not hold", c.Rate.Achieved)
		}
	})
}

// With no request count or duration given, a rate cell sends a minute of
// its rate, and never fewer requests than a percentile needs.
func TestRateCellRequestsByDefault(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int
	}{{0.1, MinSamples}, {0.5, 30}, {2, 120}} {
		if got := (Plan{}).Requests(Key{Mode: "rate", Rate: tc.rate}); got != tc.want {
			t.Errorf("%g/s: %d requests, want %d", tc.rate, got, tc.want)
		}
	}
}
