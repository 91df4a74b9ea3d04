package fleet

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/headroom-dev/headroom/config"
)

// group lists n addresses, prefix0:80 to prefix(n-1):80.
func group(prefix string, n int) *targetgroup.Group {
	g := &targetgroup.Group{Source: prefix}
	for i := range n {
		g.Targets = append(g.Targets, model.LabelSet{"__address__": model.LabelValue(fmt.Sprintf("%s%d:80", prefix, i))})
	}
	return g
}

// A discovery entry's max_targets, then the configuration's, bound the
// targets probed, in order: static targets first, then each entry's. The
// excess is counted as over_limit under its own source, and each limit
// that leaves targets out is logged once while it does.
func TestMaxTargets(t *testing.T) {
	base, err := config.Parse([]byte(`targets:
  - {name: s0, url: 'http://s0'}
  - {name: s1, url: 'http://s1'}
discovery:
  - file_sd_configs: [{files: [a.json]}]
    max_targets: 2
  - file_sd_configs: [{files: [b.json]}]
max_targets: 5
`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	f, err := New(slog.New(slog.NewTextHandler(logs, nil)), prometheus.NewRegistry(), Shard{})
	if err != nil {
		t.Fatal(err)
	}
	f.Update(map[string][]*targetgroup.Group{"discovery[0]": {group("a", 10)}, "discovery[1]": {group("b", 10)}})
	cfg := f.Config(base)
	var names []string
	for _, tg := range cfg.Targets {
		names = append(names, tg.Name)
	}
	if got := strings.Join(names, " "); got != "s0 s1 a0:80 a1:80 b0:80" {
		t.Errorf("probed %s, want s0 s1 a0:80 a1:80 b0:80", got)
	}
	want := map[[2]string]float64{{"static", Probed}: 2, {"discovery[0]", Probed}: 2, {"discovery[0]", OverLimit}: 8,
		{"discovery[1]", Probed}: 1, {"discovery[1]", OverLimit}: 9}
	for k, n := range want {
		if got := value(f, k[0], k[1]); got != n {
			t.Errorf("headroom_targets{source=%q,state=%q} = %v, want %v", k[0], k[1], got, n)
		}
	}
	lines := func() int { return strings.Count(logs.String(), "targets over the limit not probed") }
	if n := lines(); n != 2 || !strings.Contains(logs.String(), "limit=discovery[0].max_targets max_targets=2 not_probed=8") ||
		!strings.Contains(logs.String(), "limit=max_targets max_targets=5 not_probed=9 first_from=discovery[1]") {
		t.Errorf("%d lines on the limits, want one for each:\n%s", n, logs)
	}
	// Still over (by more): nothing new logged. Under again, then over: once more.
	f.Update(map[string][]*targetgroup.Group{"discovery[1]": {group("b", 20)}})
	f.Config(base)
	if n := lines(); n != 2 {
		t.Errorf("%d lines after an update still over the limits, want the 2 of before", n)
	}
	f.Update(map[string][]*targetgroup.Group{"discovery[0]": nil, "discovery[1]": nil})
	if cfg := f.Config(base); len(cfg.Targets) != 2 || value(f, "discovery[1]", OverLimit) != 0 {
		t.Errorf("%d targets probed and %v over the limit with none discovered", len(cfg.Targets), value(f, "discovery[1]", OverLimit))
	}
	f.Update(map[string][]*targetgroup.Group{"discovery[0]": {group("a", 3)}})
	f.Config(base)
	if n := lines(); n != 3 {
		t.Errorf("%d lines after the entry went over its limit again, want 3", n)
	}
}

// value is headroom_targets of a source and state.
func value(f *Fleet, source, state string) float64 {
	return testutil.ToFloat64(f.targets.WithLabelValues(source, state))
}

func TestNatural(t *testing.T) {
	sorted := []string{"", "a", "u:0", "u:1", "u:2", "u:9", "u:010", "u:10", "u:010x", "u:10y", "u:99", "u:100", "u:1000", "v:0"}
	for i, a := range sorted {
		for j, b := range sorted {
			if got, want := natural(a, b), cmp.Compare(i, j); got != want {
				t.Errorf("natural(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}
