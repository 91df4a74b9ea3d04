package config

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/file"
	"github.com/prometheus/prometheus/discovery/http"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/model/relabel"
)

// Discovery finds targets with Prometheus's own service discovery and
// relabeling. Each target it finds becomes a copy of Target with the name,
// URLs, pool and model that relabeling leaves in these labels:
//
//	target           the name (default: __address__)
//	__url__          the API's base URL (default: __scheme__://__address__, __scheme__ default http)
//	__metrics_url__  the engine's metrics (default: the URL's /metrics, as for a static target)
//	pool             the pool (default: Target's)
//	model            the model (default: Target's)
//
// A target that relabeling drops is not probed; other labels are ignored.
type Discovery struct {
	FileSDConfigs       []*file.SDConfig       `yaml:"file_sd_configs"`
	HTTPSDConfigs       []*http.SDConfig       `yaml:"http_sd_configs"`
	KubernetesSDConfigs []*kubernetes.SDConfig `yaml:"kubernetes_sd_configs"`
	RelabelConfigs      []*relabel.Config      `yaml:"relabel_configs"`
	// Target is the template of every target found: api, engine, model,
	// keys, HTTP client, pool.
	Target Target `yaml:"target"`
	// MaxTargets is the most targets of this entry the replica probes (0:
	// only the configuration's max_targets bounds them).
	MaxTargets int `yaml:"max_targets"`
}

// Configs lists the entry's discovery mechanisms for discovery.Manager.
func (d Discovery) Configs() discovery.Configs {
	var out discovery.Configs
	for _, c := range d.FileSDConfigs {
		out = append(out, c)
	}
	for _, c := range d.HTTPSDConfigs {
		out = append(out, c)
	}
	for _, c := range d.KubernetesSDConfigs {
		out = append(out, c)
	}
	return out
}

// setDirectory makes the files the mechanisms name relative to the config
// file, as Prometheus does.
func (d *Discovery) setDirectory(dir string) {
	cs := d.Configs()
	cs.SetDirectory(dir)
}

func (d Discovery) validate(path string) error {
	var errs []error
	if slices.Contains(d.FileSDConfigs, nil) || slices.Contains(d.HTTPSDConfigs, nil) || slices.Contains(d.KubernetesSDConfigs, nil) {
		return fmt.Errorf("%s: an empty entry in a *_sd_configs list", path)
	}
	if len(d.Configs()) == 0 {
		errs = append(errs, fmt.Errorf("%s: needs at least one of file_sd_configs, http_sd_configs, kubernetes_sd_configs", path))
	}
	for i, c := range d.RelabelConfigs {
		if c == nil {
			errs = append(errs, fmt.Errorf("%s.relabel_configs[%d]: empty", path, i))
		} else if err := c.Validate(model.UTF8Validation); err != nil {
			errs = append(errs, fmt.Errorf("%s.relabel_configs[%d]: %w", path, i, err))
		}
	}
	if d.MaxTargets < 0 {
		errs = append(errs, fmt.Errorf("%s.max_targets: must not be negative, got %d", path, d.MaxTargets))
	}
	for i, c := range d.KubernetesSDConfigs {
		if c.Role != kubernetes.RolePod && c.Role != kubernetes.RoleEndpointSlice {
			errs = append(errs, fmt.Errorf("%s.kubernetes_sd_configs[%d].role: must be pod or endpointslice, got %q", path, i, c.Role))
		}
	}
	errs = append(errs, d.Target.check(path+".target", true))
	return errors.Join(errs...)
}
