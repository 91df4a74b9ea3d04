package main

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/power"
)

// openPower opens the configured GPU power source, or none. Without NVML on
// the host, "auto" logs one line and the daemon runs on without GPU series.
func openPower(logger *slog.Logger, c config.Power) power.Source {
	switch c.Source {
	case "none":
		return nil
	case "dcgm":
		return power.DCGM{URL: c.DCGMURL, Client: &http.Client{Timeout: 5 * time.Second}}
	}
	n, err := power.OpenNVML(nvml.New())
	switch {
	case err == nil:
		logger.Info("GPU power from NVML")
		return n
	case errors.Is(err, power.ErrNoNVML) && c.Source == "auto":
		logger.Info("no GPU power: NVML is not available on this host", "err", err)
	default:
		logger.Error("GPU power source", "source", c.Source, "err", err)
	}
	return nil
}

// gpuTargets maps GPU indexes and UUIDs to the targets that list them. A lone
// target that lists none is given every GPU: the common one-server-per-host case.
func gpuTargets(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, t := range cfg.Targets {
		for _, g := range t.GPUs {
			out[g] = t.Name
		}
	}
	if len(cfg.Targets) == 1 && len(cfg.Targets[0].GPUs) == 0 {
		out[power.AllGPUs] = cfg.Targets[0].Name
	}
	return out
}
