package monitor

import (
	"testing"
	"time"
)

// TestScheduleKeepsBudget runs a target in virtual time with probes whose
// length grows with context and checks busy time against the budget and that
// short scenarios keep roughly their interval.
func TestScheduleKeepsBudget(t *testing.T) {
	names := []string{"short", "long"}
	durations := map[string]time.Duration{"short": 2 * time.Second, "long": 40 * time.Second}
	start := time.Unix(0, 0)
	for _, budget := range []float64{0.02, 0.1, 0.5} {
		s := NewSchedule(names, []time.Duration{time.Minute, time.Minute}, budget, start, 1)
		now, busy := start, time.Duration(0)
		count := map[string]int{}
		for now.Before(start.Add(24 * time.Hour)) {
			name, at := s.Next()
			if at.Before(now) {
				t.Fatalf("schedule went back in time")
			}
			now = at
			end := now.Add(durations[name])
			s.Done(name, now, end)
			busy += durations[name]
			count[name]++
			now = end
		}
		// The last probe's quiet time belongs to the period it paid for.
		share := busy.Seconds() / s.ready.Sub(start).Seconds()
		if share > budget*1.001 {
			t.Errorf("budget %.2f: probes occupied %.4f of the time", budget, share)
		}
		if count["long"] == 0 || count["short"] == 0 {
			t.Errorf("budget %.2f: a scenario starved: %v", budget, count)
		}
		if budget == 0.5 && count["short"] < 24*60*9/10/2 {
			t.Errorf("with a loose budget the short scenario should run near its interval; ran %d times", count["short"])
		}
	}
}

// A calibration burst is billed once, for the time it held the target: 40 s
// of it keep the target quiet until 40s/budget after the burst began.
func TestScheduleChargesBursts(t *testing.T) {
	start := time.Unix(0, 0)
	s := NewSchedule([]string{"s"}, []time.Duration{time.Second}, 0.1, start, 1)
	s.Charge(start, 4*10*time.Second)
	if _, at := s.Next(); !at.Equal(start.Add(400 * time.Second)) {
		t.Errorf("next probe at %s after a 40s burst, want 400s", at.Sub(start))
	}
	s.Charge(start.Add(time.Second), time.Second) // a smaller bill never brings the next probe forward
	if _, at := s.Next(); !at.Equal(start.Add(400 * time.Second)) {
		t.Errorf("next probe moved to %s", at.Sub(start))
	}
}

// A failed probe is retried after 5 s, then 10, 20, ... never later than
// the scenario's interval; an answer resets the backoff.
func TestScheduleRetriesFailuresWithBackoff(t *testing.T) {
	start := time.Unix(0, 0)
	s := NewSchedule([]string{"s"}, []time.Duration{time.Minute}, 1, start, 1)
	now := start
	var waits []time.Duration
	for range 6 {
		_, at := s.Next()
		now = at
		s.Failed("s", now, now)
		_, next := s.Next()
		waits = append(waits, next.Sub(now))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("retry %d after %s, want %s (all: %v)", i+1, waits[i], want[i], waits)
		}
	}
	_, at := s.Next()
	s.Done("s", at, at)
	s.Failed("s", at.Add(time.Minute), at.Add(time.Minute))
	if _, next := s.Next(); next.Sub(at.Add(time.Minute)) != RetryFirst {
		t.Errorf("after an answer the first retry waits %s, want %s", next.Sub(at.Add(time.Minute)), RetryFirst)
	}
}
