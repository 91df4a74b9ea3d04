package collector

import (
	"bufio"
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/headroom-dev/headroom/probe"
)

// valueFamily is a counter or gauge family of Probes, for WriteText: its
// name, help and type as the Desc has them, and where a pair or target
// keeps its series.
type valueFamily struct {
	name, help, typ string
	result          int // 0, 1: the pair's results of that kind; -1: not a result
	of              func(*pair) *value
}

// valueFamilies are Probes' counter and gauge families, as NewProbes
// describes them.
var valueFamilies = []valueFamily{
	{name: "headroom_probes_total", help: "Lone probes by result.", typ: "counter", result: 0},
	{name: "headroom_calibration_probes_total", help: "Calibration bursts' probes by result.", typ: "counter", result: 1},
	{name: "headroom_calibration_bursts_total", help: "Calibration bursts sent: probes sent together to measure the burst curve.", typ: "counter", result: -1,
		of: func(s *pair) *value { return s.bursts }},
	{name: "headroom_probe_input_tokens", help: "Prompt tokens of the last probe, as the server counted them.", typ: "gauge", result: -1,
		of: func(s *pair) *value { return s.inputTokens }},
	{name: "headroom_probe_last_success_timestamp_seconds", help: "Unix time of the last successful probe.", typ: "gauge", result: -1,
		of: func(s *pair) *value { return s.lastSuccess }},
}

func (f valueFamily) desc(labels []string) *prometheus.Desc {
	return prometheus.NewDesc(f.name, f.help, labels, nil)
}

const (
	busyName = "headroom_probe_busy_seconds_total"
	busyHelp = "Time with a probe in flight, calibration bursts included: what probing costs the target."
)

// WriteText implements TextWriter: the series as they are now, each family
// in the order of its label values, as the registry sorts them. Each
// pair's numbers are read under the lock and written after it, so that a
// slow reader holds no probe back.
func (p *Probes) WriteText(w *bufio.Writer, openMetrics bool) error {
	t := &text{w: w, om: openMetrics}
	p.mu.Lock()
	pairs := slices.Collect(maps.Values(p.pairs))
	targets := slices.Sorted(maps.Keys(p.targets))
	p.mu.Unlock()
	// labels: scenario, target (sorted by name).
	slices.SortFunc(pairs, func(a, b *pair) int {
		return cmp.Or(strings.Compare(a.labels[0].GetValue(), b.labels[0].GetValue()), strings.Compare(a.labels[1].GetValue(), b.labels[1].GetValue()))
	})
	var classic []uint32
	var labels []string
	for i := range p.hists {
		f := &p.hists[i]
		started := false
		for _, s := range pairs {
			p.mu.Lock()
			h := s.hists[i]
			var count uint64
			var sum float64
			if h != nil {
				count, sum, classic = h.h.count, h.h.sum, append(classic[:0], h.h.classic...)
			}
			p.mu.Unlock()
			if h == nil {
				continue
			}
			if !started {
				t.header(f.name, f.help, "histogram")
				started = true
			}
			labels = append(labels[:0], "scenario", s.labels[0].GetValue(), "target", s.labels[1].GetValue())
			var cum uint64
			for j, n := range classic {
				cum += uint64(n)
				t.count(f.name, "_bucket", labels, true, f.bounds[j], cum)
			}
			t.count(f.name, "_bucket", labels, true, posInf, count)
			t.sample(f.name, "_sum", labels, false, 0, sum)
			t.count(f.name, "_count", labels, false, 0, count)
		}
	}
	for _, f := range valueFamilies {
		started := false
		if f.result >= 0 {
			// labels: result, scenario, target: every series of one result,
			// then the next.
			var outcomes []probe.Outcome
			p.mu.Lock()
			for _, s := range pairs {
				for _, r := range s.results[f.result] {
					if !slices.Contains(outcomes, r.o) {
						outcomes = append(outcomes, r.o)
					}
				}
			}
			p.mu.Unlock()
			slices.Sort(outcomes)
			for _, o := range outcomes {
				for _, s := range pairs {
					p.mu.Lock()
					c := s.results[f.result].of(o)
					var v float64
					if c != nil {
						v = c.v
					}
					p.mu.Unlock()
					if c == nil {
						continue
					}
					if !started {
						t.header(f.name, f.help, f.typ)
						started = true
					}
					labels = append(labels[:0], "result", string(o), "scenario", s.labels[0].GetValue(), "target", s.labels[1].GetValue())
					t.sample(f.name, "", labels, false, 0, v)
				}
			}
			continue
		}
		for _, s := range pairs {
			p.mu.Lock()
			c := f.of(s)
			var v float64
			if c != nil {
				v = c.v
			}
			p.mu.Unlock()
			if c == nil {
				continue
			}
			if !started {
				t.header(f.name, f.help, f.typ)
				started = true
			}
			labels = append(labels[:0], "scenario", s.labels[0].GetValue(), "target", s.labels[1].GetValue())
			t.sample(f.name, "", labels, false, 0, v)
		}
	}
	started := false
	for _, name := range targets {
		p.mu.Lock()
		ts, ok := p.targets[name]
		var v float64
		if ok {
			v = ts.busy.v
		}
		p.mu.Unlock()
		if !ok {
			continue
		}
		if !started {
			t.header(busyName, busyHelp, "counter")
			started = true
		}
		labels = append(labels[:0], "target", name)
		t.sample(busyName, "", labels, false, 0, v)
	}
	return nil
}
