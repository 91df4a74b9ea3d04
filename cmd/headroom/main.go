// Command headroom is a Prometheus exporter and SLO capacity monitor for LLM
// inference servers. See README.md.
package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"

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
	// AutoGoMemLimit, AutoGoMemLimitRatio: --auto-gomemlimit and its ratio,
	// Prometheus 3's flags and defaults.
	AutoGoMemLimit      bool    `env:"AUTO_GOMEMLIMIT" envDefault:"true"`
	AutoGoMemLimitRatio float64 `env:"AUTO_GOMEMLIMIT_RATIO" envDefault:"0.9"`
	// GOGC: --runtime.gogc, below Prometheus's 75 (runtime.go).
	GOGC int `env:"RUNTIME_GOGC" envDefault:"50"`
}

// readSettings reads the HEADROOM_* variables over the defaults. A
// variable that does not parse leaves its field at the default and its
// error under the field's name, naming the variable.
func readSettings() (settings, map[string]error) {
	var def settings
	_ = env.ParseWithOptions(&def, env.Options{Environment: map[string]string{}}) // the envDefault values alone
	s := def
	err := env.ParseWithOptions(&s, env.Options{Prefix: "HEADROOM_"})
	errs := map[string]error{}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		if err != nil {
			errs[""] = err
		}
		return s, errs
	}
	for _, e := range agg.Errors {
		var pe env.ParseError
		if !errors.As(e, &pe) {
			errs[""] = errors.Join(errs[""], e)
			continue
		}
		reflect.ValueOf(&s).Elem().FieldByName(pe.Name).Set(reflect.ValueOf(def).FieldByName(pe.Name))
		f, _ := reflect.TypeFor[settings]().FieldByName(pe.Name)
		name := "HEADROOM_" + f.Tag.Get("env")
		errs[pe.Name] = fmt.Errorf("%s=%q: want a value of type %s", name, os.Getenv(name), pe.Type)
	}
	return s, errs
}

func main() {
	buildinfo.Fill()
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// A bad variable is the error of the commands that read it (serve and
	// demo), not of every command: `headroom version` and check-config run
	// whatever HEADROOM_SHARD_COUNT holds. The fields that parse keep
	// their values; a failed one its default.
	s, envErrs := readSettings()
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
	replay := newReplayCmd(app)
	check := app.Command("check-config", "Validate a configuration file; errors name the field's path.")
	checkFile := check.Arg("file", "configuration file").Required().String()
	checkProbe := check.Flag("probe", "Also try each target once (models, tokenizer, context length, a one-token request, its metrics page) and say what it found; exit 1 if one does not answer.").Bool()
	app.Command("version", "Print version, revision and Go version.")

	cmd, err := app.Parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "headroom:", err)
		return 2
	}
	// Each command is stopped by the variables it reads only: the demo runs
	// no shard of a fleet.
	var envErr error
	switch cmd {
	case serve.cmd.FullCommand():
		envErr = errors.Join(slices.Collect(maps.Values(envErrs))...)
	case demo.cmd.FullCommand():
		envErr = errors.Join(envErrs["ListenAddress"], envErrs["WebConfigFile"], envErrs["WebEnableLifecycle"])
	}
	if envErr != nil {
		fmt.Fprintf(os.Stderr, "headroom %s: environment: %v\n", cmd, envErr)
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
	case replay.cmd.FullCommand():
		return replay.run()
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
