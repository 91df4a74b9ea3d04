package daemon

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/monitor"
	"github.com/headroom-dev/headroom/power"
)

// OpenPower opens the configured GPU power source, or none; a DCGM
// exporter is reached through dial (nil: the network's). Without NVML on
// the host, "auto" logs one line and the daemon runs on without GPU series.
func OpenPower(logger *slog.Logger, c config.Power, dial monitor.DialFunc) power.Source {
	switch c.Source {
	case "none":
		return nil
	case "dcgm":
		client := &http.Client{Timeout: 5 * time.Second}
		if dial != nil {
			client.Transport = &http.Transport{DialContext: dial}
		}
		return power.DCGM{URL: c.DCGMURL, Client: client}
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
