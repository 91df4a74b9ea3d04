package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// checkMemLimitRatio says whether --auto-gomemlimit.ratio is in (0, 1],
// the fraction of the container's memory limit Go's soft limit is set to.
func checkMemLimitRatio(ratio float64) error {
	if math.IsNaN(ratio) || ratio <= 0 || ratio > 1 {
		return fmt.Errorf("--auto-gomemlimit.ratio=%v: want a fraction of the memory limit in (0, 1], such as 0.9", ratio)
	}
	return nil
}

// setGoMemLimit sets Go's soft memory limit to ratio of the limit
// provider reports (the cgroup's, as Prometheus 3's --auto-gomemlimit),
// and logs one line saying what it did. A GOMEMLIMIT variable wins, as
// does AUTOMEMLIMIT=off (automemlimit reads both); a process in no cgroup,
// or one with no memory limit, keeps Go's default of no limit. Only a
// cgroup that could not be read is an error.
func setGoMemLimit(logger *slog.Logger, ratio float64, provider memlimit.Provider) error {
	if err := checkMemLimitRatio(ratio); err != nil {
		return err
	}
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		logger.Info("GOMEMLIMIT set by the environment, not from the container's memory limit", "GOMEMLIMIT", v)
		return nil
	}
	if os.Getenv("AUTOMEMLIMIT") == "off" {
		logger.Info("AUTOMEMLIMIT=off: Go's memory limit not set from the container's")
		return nil
	}
	var found uint64
	var noLimit error
	wrapped := func() (uint64, error) {
		n, err := provider()
		switch {
		case errors.Is(err, memlimit.ErrNoLimit), errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
			noLimit = err
			return 0, memlimit.ErrNoLimit
		case err != nil:
			return 0, err
		}
		found = n
		return n, nil
	}
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(wrapped))
	switch {
	case err != nil:
		return fmt.Errorf("setting Go's memory limit from the cgroup's: %w", err)
	case noLimit != nil:
		logger.Info("no cgroup memory limit found: Go's memory limit not set", "reason", noLimit)
	default:
		logger.Info("Go's memory limit set from the cgroup's", "GOMEMLIMIT", limit, "cgroup_limit", found, "ratio", ratio)
	}
	return nil
}

// setGOGC sets Go's garbage collection target to percent, as Prometheus
// does (75 by default since 2.53), unless a GOGC variable is set, which
// wins; percent must be positive. Most of a daemon's heap is long-lived
// (each target's probe histograms, fits and points): at Go's default of
// 100 the heap grows to twice it before a collection, and most of that
// growth is garbage that a collection sooner would give back. The
// default, 50, is below Prometheus's: a collection marks the live heap,
// so the collector's CPU grows with the allocation rate over the target,
// and at 1,000 targets 50 took 23 MB off 187 for 0.2 ms more CPU a probe
// (4.5 against 4.3; docs/operations.md).
func setGOGC(logger *slog.Logger, percent int) error {
	if percent <= 0 {
		return fmt.Errorf("--runtime.gogc=%d: want a positive percentage, such as 50", percent)
	}
	if v := os.Getenv("GOGC"); v != "" {
		logger.Info("GOGC set by the environment, not by --runtime.gogc", "GOGC", v)
		return nil
	}
	debug.SetGCPercent(percent)
	return nil
}
