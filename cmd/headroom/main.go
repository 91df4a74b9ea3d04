// Command headroom is a Prometheus exporter and SLO capacity monitor for LLM
// inference servers. See README.md.
package main

import (
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/caarlos0/env/v11"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"

	"github.com/headroom-dev/headroom/internal/buildinfo"
)

// settings are the daemon's flags' defaults, overridable by HEADROOM_* variables.
type settings struct {
	ConfigFile    string `env:"CONFIG_FILE" envDefault:"headroom.yml"`
	ListenAddress string `env:"WEB_LISTEN_ADDRESS" envDefault:":9835"`
	WebConfigFile string `env:"WEB_CONFIG_FILE"`
	// WebEnableLifecycle: --web.enable-lifecycle.
	WebEnableLifecycle bool   `env:"WEB_ENABLE_LIFECYCLE"`
	LogLevel           string `env:"LOG_LEVEL" envDefault:"info"`
	LogFormat          string `env:"LOG_FORMAT" envDefault:"logfmt"`
	ShardCount         int    `env:"SHARD_COUNT" envDefault:"1"`
	ShardIndex         string `env:"SHARD_INDEX" envDefault:"0"`
}

func main() {
	buildinfo.Fill()
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var s settings
	if err := env.ParseWithOptions(&s, env.Options{Prefix: "HEADROOM_"}); err != nil {
		fmt.Fprintln(os.Stderr, "headroom: environment:", err)
		return 2
	}
	app := kingpin.New("headroom", "Prometheus exporter and SLO capacity monitor for LLM inference servers.")
	app.Version(version.Print("headroom"))
	app.HelpFlag.Short('h')
	// Writer: the process's stderr when run, not when promslog was loaded.
	logCfg := &promslog.Config{Level: promslog.NewLevel(), Format: promslog.NewFormat(), Writer: os.Stderr}
	app.Flag("log.level", "Only log messages with the given severity or above: debug, info, warn, error. Env: HEADROOM_LOG_LEVEL.").
		Default(s.LogLevel).SetValue(logCfg.Level)
	app.Flag("log.format", "Output format of log messages: logfmt, json. Env: HEADROOM_LOG_FORMAT.").
		Default(s.LogFormat).SetValue(logCfg.Format)

	serve := newServeCmd(app, s, logCfg)
	demo := newDemoCmd(app, s, logCfg)
	sim := newSimCmd(app, logCfg)
	bench := newBenchCmd(app, logCfg)
	rules := newRulesCmd(app)
	check := app.Command("check-config", "Validate a configuration file; errors name the field's path.")
	checkFile := check.Arg("file", "configuration file").Required().String()
	checkProbe := check.Flag("probe", "Also try each target once (models, tokenizer, context length, a one-token request, its metrics page) and say what it found; exit 1 if one does not answer.").Bool()
	app.Command("version", "Print version, revision and Go version.")

	cmd, err := app.Parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "headroom:", err)
		return 2
	}
	switch cmd {
	case serve.cmd.FullCommand():
		return serve.run()
	case demo.cmd.FullCommand():
		return demo.run()
	case bench.sweep.FullCommand():
		return bench.run()
	case bench.compare.FullCommand():
		return bench.runCompare()
	case rules.cmd.FullCommand():
		return rules.run()
	case check.FullCommand():
		return checkConfig(*checkFile, *checkProbe)
	case "version":
		fmt.Println(version.Print("headroom"))
		return 0
	}
	if code, ok := sim.dispatch(cmd); ok {
		return code
	}
	return 2
}
