package fleet

import (
	"iter"

	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/headroom-dev/headroom/config"
)

// Labels that relabeling sets to make a target of what discovery found;
// config.Discovery documents them.
const (
	NameLabel       = "target"
	URLLabel        = "__url__"
	MetricsURLLabel = "__metrics_url__"
	PoolLabel       = "pool"
	ModelLabel      = "model"
)

// Resolved is one discovered address after relabeling: a target, dropped,
// or an error saying what is wrong with it.
type Resolved struct {
	Target  config.Target
	Group   string // the group's source, to say where a problem came from
	Dropped bool
	Err     error
}

// Resolve relabels every address in groups and fills d's template with
// what is left, as Prometheus makes scrape targets: a group's labels under
// its targets' own, then relabel_configs. It yields each as it goes: a list
// of 100,000 addresses is not held resolved at once.
func Resolve(d config.Discovery, groups []*targetgroup.Group) iter.Seq[Resolved] {
	return func(yield func(Resolved) bool) {
		lb := labels.NewBuilder(labels.EmptyLabels())
		for _, g := range groups {
			for _, tl := range g.Targets {
				lb.Reset(labels.EmptyLabels())
				for k, v := range g.Labels {
					lb.Set(string(k), string(v))
				}
				for k, v := range tl {
					lb.Set(string(k), string(v))
				}
				if lb.Get("__scheme__") == "" {
					lb.Set("__scheme__", "http")
				}
				r := Resolved{Group: g.Source}
				if !relabel.ProcessBuilder(lb, d.RelabelConfigs...) {
					r.Dropped = true
				} else {
					r.Target, r.Err = fill(d.Target, lb)
				}
				if !yield(r) {
					return
				}
			}
		}
	}
}

func fill(t config.Target, lb *labels.Builder) (config.Target, error) {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	addr := lb.Get("__address__")
	t.Name = or(lb.Get(NameLabel), addr)
	t.URL = or(lb.Get(URLLabel), lb.Get("__scheme__")+"://"+addr)
	t.MetricsURL = lb.Get(MetricsURLLabel)
	t.Pool = or(lb.Get(PoolLabel), t.Pool)
	t.Model = or(lb.Get(ModelLabel), t.Model)
	t.SetDefaults()
	return t, t.Validate()
}
