// Package fleet decides which targets this replica probes: the config file's
// static targets and those its discovery entries find through Prometheus's
// service discovery and relabeling, keeping the ones its shard owns.
package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/headroom-dev/headroom/config"
)

// Target states, the state label of headroom_targets.
const (
	Probed     = "probed"      // this replica probes it
	OtherShard = "other_shard" // another replica's
	Dropped    = "dropped"     // relabeling dropped it
	Invalid    = "invalid"     // what relabeling left is not a valid target
	Duplicate  = "duplicate"   // its name was taken by an earlier one
	OverLimit  = "over_limit"  // past max_targets, its entry's or the configuration's
)

// Fleet is the set of targets to probe. Its methods other than Run are
// called from the one goroutine that applies configurations, in order.
type Fleet struct {
	logger  *slog.Logger
	shard   Shard
	metrics *discovery.SDMetrics
	reg     prometheus.Registerer
	mgr     *discovery.Manager
	groups  map[string][]*targetgroup.Group
	sets    []string // the discovery entries running, by source
	targets *prometheus.GaugeVec
	// logged holds the problems already logged, so that each is logged
	// once, when it appears, not at every update.
	logged map[string]bool
	dial   promconfig.DialContextFunc // http_sd's connections; nil: the network's
}

// Option changes how a Fleet reaches its discovery endpoints.
type Option func(*Fleet)

// WithDial replaces the network under http_sd: the daemon's virtual-time
// tests serve target lists in memory through it.
func WithDial(dial promconfig.DialContextFunc) Option { return func(f *Fleet) { f.dial = dial } }

// New registers discovery's metrics (Prometheus's own prometheus_sd_*
// names, so that operators' alerts on discovery failures apply) and
// headroom_targets on reg.
func New(logger *slog.Logger, reg prometheus.Registerer, shard Shard, opts ...Option) (*Fleet, error) {
	m, err := discovery.CreateAndRegisterSDMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register discovery metrics: %w", err)
	}
	f := &Fleet{logger: logger, shard: shard, metrics: m, reg: reg, groups: map[string][]*targetgroup.Group{}, logged: map[string]bool{},
		targets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "headroom_targets",
			Help: "Targets known to this replica, by where they come from (static or discovery[i]) and state: probed, other_shard, dropped, invalid, duplicate, over_limit."},
			[]string{"source", "state"})}
	for _, o := range opts {
		o(f)
	}
	if err := reg.Register(f.targets); err != nil {
		return nil, fmt.Errorf("register headroom_targets: %w", err)
	}
	return f, nil
}

// Start makes discovery's manager for ctx; run runs it until ctx ends, and
// Updates then delivers what it finds. Call it once, before Discover.
func (f *Fleet) Start(ctx context.Context) (run func(), err error) {
	logger := slog.New(quietHandler(f.logger.Handler(), quietFor)).With("component", "discovery")
	f.mgr = discovery.NewManager(ctx, logger, f.reg, f.metrics, discovery.Name("headroom"))
	if f.mgr == nil { // it logged why: its metrics would not register
		return nil, errors.New("start discovery: the manager's metrics would not register")
	}
	return func() { _ = f.mgr.Run() }, nil
}

// Discover points discovery at cfg's entries: mechanisms whose
// configuration is unchanged keep running.
func (f *Fleet) Discover(cfg *config.Config) error {
	sets := map[string]discovery.Configs{}
	for i, d := range cfg.Discovery {
		sets[source(i)] = bounded(d.Configs(), f.dial)
	}
	// Entries that a reload removed get none, so their providers stop.
	for _, name := range f.sets {
		if _, ok := sets[name]; !ok {
			sets[name] = nil
			delete(f.groups, name)
		}
	}
	f.sets = f.sets[:0]
	for i := range cfg.Discovery {
		f.sets = append(f.sets, source(i))
	}
	if err := f.mgr.ApplyConfig(sets); err != nil {
		return fmt.Errorf("apply discovery configuration: %w", err)
	}
	return nil
}

// Updates delivers each entry's target groups as they change.
func (f *Fleet) Updates() <-chan map[string][]*targetgroup.Group { return f.mgr.SyncCh() }

// Update keeps the groups discovery delivered, for the next Config.
func (f *Fleet) Update(groups map[string][]*targetgroup.Group) {
	for name, gs := range groups {
		f.groups[name] = gs
	}
}

// Config is base with the targets this replica probes: base's own, then
// each discovery entry's, each name taken once, only those the shard owns,
// and at most each entry's max_targets and base's max_targets, in that
// order (an entry's groups by their source, each group's targets as
// listed: http_sd's groups, url:0, url:1, ..., in the list's order). headroom_targets counts them all by state; a problem, and a
// limit that leaves targets out, is logged once, when it appears.
func (f *Fleet) Config(base *config.Config) *config.Config {
	out := *base
	out.Targets = nil
	counts := map[[2]string]int{}
	seen := map[string]bool{}
	problems := map[string]bool{}
	type overrun struct {
		field, source string
		limit, over   int
	}
	overruns := map[string]*overrun{} // by the limit's field
	add := func(src string, t config.Target, entry *int, entryLimit int, field string) {
		state := Probed
		switch {
		case seen[t.Name]:
			state = Duplicate
			problems[fmt.Sprintf("%s: target %q: the name is already taken; relabel target to tell them apart", src, t.Name)] = true
		case !f.shard.Owns(t.Name):
			state = OtherShard
		case entryLimit > 0 && *entry >= entryLimit:
			state = OverLimit
		case base.MaxTargets > 0 && len(out.Targets) >= base.MaxTargets:
			state, field, entryLimit = OverLimit, "max_targets", base.MaxTargets
		default:
			out.Targets = append(out.Targets, t)
			*entry++
		}
		if state == OverLimit {
			o := overruns[field]
			if o == nil {
				o = &overrun{field: field, source: src, limit: entryLimit}
				overruns[field] = o
			}
			o.over++
		}
		seen[t.Name] = true
		counts[[2]string{src, state}]++
	}
	static := 0
	for _, t := range base.Targets {
		add("static", t, &static, 0, "")
	}
	for i, d := range base.Discovery {
		src := source(i)
		groups := slices.Clone(f.groups[src])
		slices.SortFunc(groups, func(a, b *targetgroup.Group) int { return natural(a.Source, b.Source) })
		probed := 0
		for r := range Resolve(d, groups) {
			switch {
			case r.Dropped:
				counts[[2]string{src, Dropped}]++
			case r.Err != nil:
				counts[[2]string{src, Invalid}]++
				problems[fmt.Sprintf("%s: group %q: %v", src, r.Group, r.Err)] = true
			default:
				add(src, r.Target, &probed, d.MaxTargets, src+".max_targets")
			}
		}
	}
	f.targets.Reset()
	for k, n := range counts {
		f.targets.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
	for p := range problems {
		if !f.logged[p] {
			f.logger.Warn("target not probed", "problem", p)
		}
	}
	for field, o := range overruns {
		key := "over " + field
		if !f.logged[key] {
			f.logger.Warn("targets over the limit not probed: raise it, or shard", "limit", field, "max_targets", o.limit, "not_probed", o.over, "first_from", o.source)
		}
		problems[key] = true
	}
	f.logged = problems
	// Kept until the next update: without the room append left for
	// growing (a quarter more, 500 bytes a target).
	out.Targets = slices.Clone(out.Targets)
	return &out
}

// natural compares strings as people sort them: runs of digits by their
// value, so that http_sd's group url:9 comes before url:10. Strings equal
// so (a leading zero apart) compare byte by byte.
func natural(a, b string) int {
	return cmp.Or(byValue(a, b), strings.Compare(a, b))
}

func byValue(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits is the length of the run of digits s starts with.
func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

func source(i int) string { return fmt.Sprintf("discovery[%d]", i) }
