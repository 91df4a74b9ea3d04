package main

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
)

// withoutMemLimitEnv clears GOMEMLIMIT and AUTOMEMLIMIT for the test and
// restores them, and Go's memory limit, after it.
func withoutMemLimitEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} {
		t.Setenv(k, "") // restores the old value at the end
		os.Unsetenv(k)
	}
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

// shippedServe parses `serve` with no flags over the HEADROOM_* settings:
// the flags a user gets.
func shippedServe(t *testing.T) (*kingpin.Application, *serveCmd) {
	t.Helper()
	s, errs := readSettings()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	app := kingpin.New("headroom", "")
	serve := newServeCmd(app, s, &promslog.Config{})
	if _, err := app.Parse([]string{"serve"}); err != nil {
		t.Fatal(err)
	}
	return app, serve
}

// Prometheus 3's flags and defaults: on, at 0.9 of the cgroup's limit.
func TestAutoGoMemLimitFlags(t *testing.T) {
	app, serve := shippedServe(t)
	if !serve.memLimit || serve.memLimitRatio != 0.9 {
		t.Errorf("--auto-gomemlimit=%v --auto-gomemlimit.ratio=%v by default, want true and 0.9", serve.memLimit, serve.memLimitRatio)
	}
	if _, err := app.Parse([]string{"serve", "--no-auto-gomemlimit", "--auto-gomemlimit.ratio=0.5"}); err != nil {
		t.Fatal(err)
	}
	if serve.memLimit || serve.memLimitRatio != 0.5 {
		t.Errorf("--no-auto-gomemlimit --auto-gomemlimit.ratio=0.5 read as %v and %v", serve.memLimit, serve.memLimitRatio)
	}

	// A ratio outside (0, 1] stops serve before it loads its configuration.
	cfg := filepath.Join(t.TempDir(), "headroom.yml")
	if err := os.WriteFile(cfg, []byte("targets: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"0", "-0.5", "1.5", "NaN"} {
		if code := run([]string{"serve", "--config.file", cfg, "--web.listen-address", "127.0.0.1:0", "--auto-gomemlimit.ratio=" + r}); code != 2 {
			t.Errorf("--auto-gomemlimit.ratio=%s: exit %d, want 2", r, code)
		}
		if err := checkMemLimitRatio(map[string]float64{"0": 0, "-0.5": -0.5, "1.5": 1.5, "NaN": math.NaN()}[r]); err == nil || !strings.Contains(err.Error(), "(0, 1]") {
			t.Errorf("ratio %s: error %v, want one naming (0, 1]", r, err)
		}
	}
	if err := checkMemLimitRatio(1); err != nil {
		t.Errorf("ratio 1: %v", err)
	}
}

func TestSetGoMemLimit(t *testing.T) {
	const cgroup = 256 << 20 // the shipped manifests' limit
	calls := 0
	fake := func() (uint64, error) { calls++; return cgroup, nil }

	t.Run("cgroup limit", func(t *testing.T) {
		withoutMemLimitEnv(t)
		var buf bytes.Buffer
		if err := setGoMemLimit(slog.New(slog.NewTextHandler(&buf, nil)), 0.9, fake); err != nil {
			t.Fatal(err)
		}
		if got, want := debug.SetMemoryLimit(-1), int64(241591910); got != want {
			t.Errorf("Go's memory limit %d, want 0.9 x %d = %d", got, cgroup, want)
		}
		if out := buf.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "GOMEMLIMIT=241591910") {
			t.Errorf("log %q, want one line with the limit set", out)
		}
	})

	t.Run("GOMEMLIMIT wins", func(t *testing.T) {
		withoutMemLimitEnv(t)
		t.Setenv("GOMEMLIMIT", "1GiB")
		debug.SetMemoryLimit(1 << 30)
		calls = 0
		var buf bytes.Buffer
		if err := setGoMemLimit(slog.New(slog.NewTextHandler(&buf, nil)), 0.9, fake); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetMemoryLimit(-1); got != 1<<30 || calls != 0 {
			t.Errorf("with GOMEMLIMIT=1GiB: limit %d, provider called %d times; want 1GiB and none", got, calls)
		}
		if !strings.Contains(buf.String(), "GOMEMLIMIT=1GiB") {
			t.Errorf("log %q, want the variable's value", buf.String())
		}
	})

	t.Run("no cgroup", func(t *testing.T) {
		for _, e := range []error{memlimit.ErrNoLimit, memlimit.ErrNoCgroup, memlimit.ErrCgroupsNotSupported} {
			withoutMemLimitEnv(t)
			var buf bytes.Buffer
			err := setGoMemLimit(slog.New(slog.NewTextHandler(&buf, nil)), 0.9, func() (uint64, error) { return 0, e })
			if err != nil {
				t.Errorf("%v: %v, want no error", e, err)
			}
			if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
				t.Errorf("%v: limit %d, want none", e, got)
			}
			if out := buf.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=INFO") || !strings.Contains(out, "no cgroup memory limit") {
				t.Errorf("%v: log %q, want one info line", e, out)
			}
		}
	})

	t.Run("unreadable cgroup", func(t *testing.T) {
		withoutMemLimitEnv(t)
		broken := errors.New("read /sys/fs/cgroup/memory.max: permission denied")
		err := setGoMemLimit(slog.New(slog.DiscardHandler), 0.9, func() (uint64, error) { return 0, broken })
		if !errors.Is(err, broken) {
			t.Errorf("error %v, want the provider's", err)
		}
	})
}

// --runtime.gogc: 50 by default, a GOGC variable winning, and
// no percentage that is not positive.
func TestRuntimeGOGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	t.Setenv("GOGC", "") // restores the old value at the end
	os.Unsetenv("GOGC")
	_, serve := shippedServe(t)
	logger := promslog.NewNopLogger()
	if err := setGOGC(logger, serve.gogc); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("GOGC %d by default, want 50", got)
	}
	os.Setenv("GOGC", "200")
	if err := setGOGC(logger, 30); err != nil || debug.SetGCPercent(100) != 100 {
		t.Errorf("with GOGC=200 in the environment --runtime.gogc=30 changed Go's target (err %v)", err)
	}
	for _, p := range []int{0, -1} {
		if err := setGOGC(logger, p); err == nil || !strings.Contains(err.Error(), "--runtime.gogc") {
			t.Errorf("--runtime.gogc=%d: %v, want an error naming the flag", p, err)
		}
	}
}
