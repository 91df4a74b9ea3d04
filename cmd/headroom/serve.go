package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/fleet"
	"github.com/headroom-dev/headroom/internal/daemon"
)

type webFlags struct {
	listen        []string
	webConfigFile string
	systemdSocket bool
	// lifecycle enables POST /-/reload, off by default as Prometheus's
	// --web.enable-lifecycle: an endpoint that changes the daemon's state
	// is opt-in.
	lifecycle bool
}

func addWebFlags(cmd *kingpin.CmdClause, s settings) *webFlags {
	w := &webFlags{}
	cmd.Flag("web.listen-address", "Addresses on which to expose metrics and the web interface. Env: HEADROOM_WEB_LISTEN_ADDRESS.").
		Default(s.ListenAddress).StringsVar(&w.listen)
	cmd.Flag("web.config.file", "Path to a web configuration file enabling TLS or basic auth (exporter-toolkit format). Env: HEADROOM_WEB_CONFIG_FILE.").
		Default(s.WebConfigFile).StringVar(&w.webConfigFile)
	cmd.Flag("web.enable-lifecycle", "Enable reloading the configuration via HTTP POST /-/reload (cross-site browser requests are refused). SIGHUP reloads either way. Env: HEADROOM_WEB_ENABLE_LIFECYCLE.").
		Default(fmt.Sprint(s.WebEnableLifecycle)).BoolVar(&w.lifecycle)
	return w
}

func (w *webFlags) toolkit() *web.FlagConfig {
	return &web.FlagConfig{WebListenAddresses: &w.listen, WebSystemdSocket: &w.systemdSocket, WebConfigFile: &w.webConfigFile}
}

type serveCmd struct {
	cmd        *kingpin.CmdClause
	logCfg     *promslog.Config
	configFile string
	web        *webFlags
	shardIndex string
	shardCount int
	// memLimit, memLimitRatio: --auto-gomemlimit, --auto-gomemlimit.ratio.
	memLimit      bool
	memLimitRatio float64
	gogc          int // --runtime.gogc
}

func newServeCmd(app *kingpin.Application, s settings, logCfg *promslog.Config) *serveCmd {
	c := &serveCmd{logCfg: logCfg}
	c.cmd = app.Command("serve", "Run the probe daemon and exporter (default).").Default()
	c.cmd.Flag("config.file", "Configuration file. Env: HEADROOM_CONFIG_FILE.").Default(s.ConfigFile).StringVar(&c.configFile)
	c.web = addWebFlags(c.cmd, s)
	c.cmd.Flag("shard.count", "Replicas that split the targets between them. Env: HEADROOM_SHARD_COUNT.").Default(fmt.Sprint(s.ShardCount)).IntVar(&c.shardCount)
	c.cmd.Flag("shard.index", "This replica's share, 0 to shard.count-1, or \"ordinal\" for the number ending the host name (a StatefulSet's pod). Env: HEADROOM_SHARD_INDEX.").
		Default(s.ShardIndex).StringVar(&c.shardIndex)
	c.cmd.Flag("auto-gomemlimit", "Set Go's soft memory limit (GOMEMLIMIT) from the container's cgroup memory limit, so that the garbage collector works harder near it instead of the process being OOM-killed; a GOMEMLIMIT variable wins. Env: HEADROOM_AUTO_GOMEMLIMIT.").
		Default(fmt.Sprint(s.AutoGoMemLimit)).BoolVar(&c.memLimit)
	c.cmd.Flag("auto-gomemlimit.ratio", "The fraction of the cgroup's memory limit, in (0, 1], that --auto-gomemlimit sets Go's soft memory limit to. Env: HEADROOM_AUTO_GOMEMLIMIT_RATIO.").
		Default(fmt.Sprint(s.AutoGoMemLimitRatio)).Float64Var(&c.memLimitRatio)
	c.cmd.Flag("runtime.gogc", "Go's garbage collection target (GOGC): the heap grows by this percentage of the live heap between collections. 50, below Prometheus's 75: the heap is mostly long-lived and the collector's CPU small; a GOGC variable wins. Env: HEADROOM_RUNTIME_GOGC.").
		Default(fmt.Sprint(s.GOGC)).IntVar(&c.gogc)
	return c
}

func (c *serveCmd) run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := promslog.New(c.logCfg)
	if err := checkMemLimitRatio(c.memLimitRatio); err != nil {
		fmt.Fprintln(os.Stderr, "headroom serve:", err)
		return 2
	}
	if err := setGOGC(logger, c.gogc); err != nil {
		fmt.Fprintln(os.Stderr, "headroom serve:", err)
		return 2
	}
	if c.memLimit {
		if err := setGoMemLimit(logger, c.memLimitRatio, memlimit.FromCgroup); err != nil {
			logger.Warn("auto-gomemlimit", "err", err)
		}
	}
	return c.serve(ctx, logger, nil)
}

// serve runs the daemon until ctx ends; ready, if not nil, receives the
// bound listener addresses.
func (c *serveCmd) serve(ctx context.Context, logger *slog.Logger, ready func([]net.Addr)) int {
	shard, err := fleet.ParseShard(c.shardIndex, c.shardCount, os.Hostname)
	if err != nil {
		logger.Error("sharding", "err", err)
		return 1
	}
	path := c.configFile
	d, err := daemon.New(logger, shard, func() (*config.Config, error) { return config.Load(path) })
	if err != nil {
		logger.Error("load config", "file", path, "err", err)
		return 1
	}
	return serveDaemon(ctx, logger, d, c.web, ready)
}

// serveDaemon binds the listeners, then serves d on them until ctx ends or
// the server fails; SIGHUP reloads. A taken port exits at once, before any
// probe. ready, if not nil, receives the bound addresses.
func serveDaemon(ctx context.Context, logger *slog.Logger, d *daemon.Daemon, wf *webFlags, ready func([]net.Addr)) int {
	listeners := make([]net.Listener, 0, len(wf.listen))
	addrs := make([]net.Addr, 0, len(wf.listen))
	for _, a := range wf.listen {
		l, err := net.Listen("tcp", a)
		if err != nil {
			logger.Error("listen", "address", a, "err", err)
			for _, l := range listeners {
				l.Close()
			}
			return 1
		}
		listeners, addrs = append(listeners, l), append(addrs, l.Addr())
	}
	if ready != nil {
		ready(addrs)
	}
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = d.Reload(ctx) // logged, and headroom_config_last_reload_successful says so
			}
		}
	})
	err := d.Serve(ctx, listeners, wf.toolkit(), wf.lifecycle)
	cancel()
	signal.Stop(hup)
	wg.Wait()
	if err != nil {
		logger.Error("serve", "err", err)
		return 1
	}
	return 0
}
