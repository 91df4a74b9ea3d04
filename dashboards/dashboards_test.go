package dashboards

//lint:file-ignore SA1019 The SDK's current API is dashboardv2, written as dashboard.grafana.app/v2 resources, which Grafana 12 loads only with its experimental Dynamic Dashboards toggle and which file provisioning (compose, Helm, kustomize) does not load; classic JSON loads in Grafana 12 and 13 alike. The v2 build is kept on the dashboards-v2 branch (issue 39).

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/headroom-dev/headroom/internal/contract"
)

func TestCommittedJSONMatchesGenerator(t *testing.T) {
	for name, b := range All() {
		want, err := JSON(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s drifted from the generator: run go generate ./dashboards", name)
		}
	}
}

func TestDashboardsAreValid(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	metricRE := regexp.MustCompile(`[a-z_:]*headroom[_:][a-z0-9_:]+`)
	// Series the shipped rules record (the pool view's) are theirs to name.
	rules, err := os.ReadFile("../alerts/headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`record: (\S+)`).FindAllStringSubmatch(string(rules), -1) {
		recorded[m[1]] = true
	}
	rateRE := regexp.MustCompile(`(rate|increase)\([^\[]*\[([^\]]+)\]`)
	for name := range All() {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		d := &dashboard.Dashboard{}
		if err := d.UnmarshalJSONStrict(raw); failed(err) {
			t.Fatalf("%s: strict unmarshal: %v", name, err)
		}
		if err := d.Validate(); failed(err) {
			t.Fatalf("%s: validate: %v", name, err)
		}
		for _, p := range d.Panels {
			panel := p.Panel
			if panel == nil {
				continue // rows
			}
			title := ""
			if panel.Title != nil {
				title = *panel.Title
			}
			if panel.Description == nil || *panel.Description == "" {
				t.Errorf("%s: panel %q has no description", name, title)
			}
			if panel.FieldConfig == nil || panel.FieldConfig.Defaults.Unit == nil {
				t.Errorf("%s: panel %q has no unit", name, title)
			}
		}
		for _, m := range rateRE.FindAllStringSubmatch(string(raw), -1) {
			if m[2] != "$__rate_interval" {
				t.Errorf("%s: %s over [%s], want [$__rate_interval]", name, m[1], m[2])
			}
		}
		for _, m := range metricRE.FindAllString(string(raw), -1) {
			if !contract.Has(m) && !recorded[m] {
				t.Errorf("%s: %s is neither in the metric contract nor recorded by alerts/headroom.rules.yml", name, m)
			}
		}
	}
}

// failed reads the SDK's errors, which come back as a typed-nil
// cog.BuildErrors inside a non-nil error interface when there are none.
func failed(err error) bool {
	var be cog.BuildErrors
	if errors.As(err, &be) {
		return len(be) > 0
	}
	return err != nil
}

// Calibration bursts are drawn apart (issue 41): a panel that reads a
// headroom_calibration_* series reads nothing else of headroom's probes and
// draws points, and so no SLO panel mixes a burst into what users meet.
func TestBurstsDrawnApart(t *testing.T) {
	probeRE := regexp.MustCompile(`headroom_(probe|calibration)_[a-z_]+|headroom_probes_total`)
	bursts := 0
	for name := range All() {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title       string
				Targets     []struct{ Expr string }
				FieldConfig struct {
					Defaults struct {
						Custom struct{ DrawStyle string }
					}
				}
			}
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		for _, p := range d.Panels {
			var calibration, lone []string
			for _, x := range p.Targets {
				for _, m := range probeRE.FindAllString(x.Expr, -1) {
					if strings.HasPrefix(m, "headroom_calibration_") {
						calibration = append(calibration, m)
					} else {
						lone = append(lone, m)
					}
				}
			}
			if len(calibration) == 0 {
				continue
			}
			bursts++
			if len(lone) > 0 {
				t.Errorf("%s: panel %q mixes %v into %v", name, p.Title, calibration, lone)
			}
			if p.FieldConfig.Defaults.Custom.DrawStyle != "points" {
				t.Errorf("%s: panel %q draws bursts as %q, want points", name, p.Title, p.FieldConfig.Defaults.Custom.DrawStyle)
			}
		}
	}
	if bursts == 0 {
		t.Error("no panel draws calibration bursts")
	}
}
