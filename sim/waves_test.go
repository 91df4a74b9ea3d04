package sim

import "testing"

// An engine that prefills the waiting prompts together keeps a closed
// loop in waves: the first round's requests have their first tokens at
// about one time, decode in one batch, end together, and the second round
// arrives as a burst that waits as long as the first. The capacity
// model's twin counts on it (capacity's TestAWaveStaysAWave); report 000's
// short chatbot, 48 requests of 8K prompts and 1,024 tokens, is the case
// docs/capacity-model-details.md quotes.
func TestAClosedLoopKeepsItsWaves(t *testing.T) {
	reports, err := Reports()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := LookupProfile(reports[0].Profile)
	if err != nil {
		t.Fatal(err)
	}
	const n, prompt, output = 48, 8192, 1024
	e := NewEngine(prof.Params)
	type req struct {
		start, first float64
		round        int
	}
	reqs := map[int64]*req{}
	var id int64
	submit := func(round int) {
		id++
		reqs[id] = &req{start: e.Now(), round: round}
		if err := e.Submit(id, prompt, output); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		submit(0)
	}
	var ttft [2]float64
	endLo, endHi := 0.0, 0.0
	for !e.Idle() {
		if e.Step(func(rid int64, k EventKind, at float64) {
			r := reqs[rid]
			switch k {
			case FirstToken:
				r.first = at
			case Finished:
				ttft[r.round] += (r.first - r.start) / n
				if r.round == 0 {
					if endLo == 0 || at < endLo {
						endLo = at
					}
					endHi = max(endHi, at)
					submit(1)
				}
			}
		}) == 0 {
			e.AdvanceTo(e.NextWake())
		}
	}
	t.Logf("%s, %d x %d/%d: mean TTFT %.2f s in the first round, %.2f s in the second; the first round's ends within %.2f s",
		prof.Name, n, prompt, output, ttft[0], ttft[1], endHi-endLo)
	if ttft[1] < 0.9*ttft[0] || endHi-endLo > 1 {
		t.Errorf("the second round waited %.2f s against the first's %.2f, its arrivals spread over %.2f s: no wave", ttft[1], ttft[0], endHi-endLo)
	}
}
