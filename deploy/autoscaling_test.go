package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// scaledObject is keda.sh/v1alpha1's ScaledObject, field for field as
// KEDA's apis/keda/v1alpha1 declares it (status left out: nobody writes
// it). KEDA's module would bring the whole operator and its cloud SDKs
// into go.mod for four structs; the HPA behavior inside is k8s.io/api's
// own type, as in KEDA's.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		ScaleTargetRef *struct {
			Name                   string `json:"name"`
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval       *int32 `json:"pollingInterval,omitempty"`
		InitialCooldownPeriod *int32 `json:"initialCooldownPeriod,omitempty"`
		CooldownPeriod        *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount      *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount       *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount       *int32 `json:"maxReplicaCount,omitempty"`
		Advanced              *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
				Name     string                                         `json:"name,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
			ScalingModifiers              struct {
				Formula          string                         `json:"formula,omitempty"`
				Target           string                         `json:"target,omitempty"`
				ActivationTarget string                         `json:"activationTarget,omitempty"`
				MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
			} `json:"scalingModifiers,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
			MetricType autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
		} `json:"triggers"`
		Fallback *struct {
			FailureThreshold int32  `json:"failureThreshold"`
			Replicas         int32  `json:"replicas"`
			Behavior         string `json:"behavior,omitempty"`
		} `json:"fallback,omitempty"`
	} `json:"spec"`
}

// adapterConfig is prometheus-adapter's configuration file
// (pkg/config's MetricsDiscoveryConfig), the external rules' part, with the
// namespaced key its docs/externalmetrics.md describes.
type adapterConfig struct {
	Rules         []adapterRule `yaml:"rules"`
	ExternalRules []adapterRule `yaml:"externalRules"`
}

type adapterRule struct {
	SeriesQuery   string `yaml:"seriesQuery"`
	SeriesFilters []struct {
		Is    string `yaml:"is,omitempty"`
		IsNot string `yaml:"isNot,omitempty"`
	} `yaml:"seriesFilters"`
	Resources struct {
		Template  string                       `yaml:"template,omitempty"`
		Overrides map[string]map[string]string `yaml:"overrides,omitempty"`
		// Namespaced false keeps the adapter from adding the HPA's
		// namespace to the query.
		Namespaced *bool `yaml:"namespaced,omitempty"`
	} `yaml:"resources"`
	Name struct {
		Matches string `yaml:"matches"`
		As      string `yaml:"as"`
	} `yaml:"name"`
	MetricsQuery string `yaml:"metricsQuery,omitempty"`
}

// The Prometheus scaler's metadata keys (KEDA's prometheus scaler docs).
var kedaPrometheusKeys = map[string]bool{"serverAddress": true, "query": true, "queryParameters": true, "threshold": true,
	"activationThreshold": true, "namespace": true, "customHeaders": true, "ignoreNullValues": true, "unsafeSsl": true,
	"timeout": true, "authModes": true}

// TestAutoscalingExamples renders the KEDA and the HPA/prometheus-adapter
// examples with kustomize, decodes every object strictly (the HPA into
// k8s.io/api's type, the ScaledObject and the adapter's file into local
// copies of their schemas), and holds their queries to the rules: each
// parses as PromQL and reads only recording rules that `headroom rules`
// writes, and the replicas they set are the signal's value.
func TestAutoscalingExamples(t *testing.T) {
	recorded := recordingRules(t)
	var seen []string
	for _, dir := range []string{"../kubernetes/autoscaling/keda", "../kubernetes/autoscaling/hpa"} {
		dec := yaml.NewDecoder(bytes.NewReader(tool(t, "kustomize", "build", dir)))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", dir, err)
			}
			b, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			kind, _ := doc["kind"].(string)
			seen = append(seen, kind)
			strict := func(v any) {
				t.Helper()
				if err := sigsyaml.UnmarshalStrict(b, v); err != nil {
					t.Fatalf("%s %s: %v", dir, kind, err)
				}
			}
			switch kind {
			case "ScaledObject":
				var so scaledObject
				strict(&so)
				checkScaledObject(t, so, recorded)
			case "HorizontalPodAutoscaler":
				var hpa autoscalingv2.HorizontalPodAutoscaler
				strict(&hpa)
				checkHPA(t, hpa)
			case "ConfigMap":
				var cm corev1.ConfigMap
				strict(&cm)
				checkAdapter(t, cm, recorded)
			default:
				t.Errorf("%s: unexpected kind %q", dir, kind)
			}
		}
	}
	if strings.Join(seen, " ") != "ScaledObject ConfigMap HorizontalPodAutoscaler" {
		t.Errorf("rendered %v, want a ScaledObject, then the adapter's ConfigMap and an HPA", seen)
	}
}

// recordingRules are the records of the shipped rules.
func recordingRules(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../alerts/headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct{ Record string }
		}
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = true
			}
		}
	}
	return out
}

// checkQuery parses q as PromQL and returns the pool its selectors name;
// every series it reads must be a recording rule.
func checkQuery(t *testing.T, what, q string, recorded map[string]bool) string {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	if err != nil {
		t.Errorf("%s: %q: %v", what, q, err)
		return ""
	}
	pool := ""
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if !recorded[vs.Name] {
			t.Errorf("%s reads %s, which no rule of alerts/headroom.rules.yml records", what, vs.Name)
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == "pool" && m.Type == labels.MatchEqual {
				pool = m.Value
			}
		}
		return nil
	})
	return pool
}

func checkScaledObject(t *testing.T, so scaledObject, recorded map[string]bool) {
	t.Helper()
	if so.APIVersion != "keda.sh/v1alpha1" || so.Spec.ScaleTargetRef == nil || so.Spec.ScaleTargetRef.Name == "" {
		t.Errorf("ScaledObject %s: %s, target %v", so.Name, so.APIVersion, so.Spec.ScaleTargetRef)
	}
	if len(so.Spec.Triggers) != 1 {
		t.Fatalf("ScaledObject %s: %d triggers, want headroom's alone", so.Name, len(so.Spec.Triggers))
	}
	tr := so.Spec.Triggers[0]
	for k := range tr.Metadata {
		if !kedaPrometheusKeys[k] {
			t.Errorf("ScaledObject %s: the prometheus scaler has no metadata %q", so.Name, k)
		}
	}
	for _, k := range []string{"serverAddress", "query", "threshold"} {
		if tr.Metadata[k] == "" {
			t.Errorf("ScaledObject %s: the prometheus scaler needs %s", so.Name, k)
		}
	}
	// ceil(value / threshold) replicas: the signal's value itself.
	if tr.Type != "prometheus" || tr.MetricType != autoscalingv2.AverageValueMetricType || tr.Metadata["threshold"] != "1" {
		t.Errorf("ScaledObject %s: trigger %s, %s, threshold %q: the replicas would not be the signal's value", so.Name, tr.Type, tr.MetricType, tr.Metadata["threshold"])
	}
	if pool := checkQuery(t, "ScaledObject "+so.Name, tr.Metadata["query"], recorded); pool == "" {
		t.Errorf("ScaledObject %s: the query names no pool", so.Name)
	}
	if f := so.Spec.Fallback; f == nil || f.Behavior != "currentReplicas" {
		t.Errorf("ScaledObject %s: without the signal it should keep the replicas there are, fallback %+v", so.Name, f)
	}
}

func checkHPA(t *testing.T, hpa autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].External == nil {
		t.Fatalf("HPA %s: want one External metric, got %+v", hpa.Name, hpa.Spec.Metrics)
	}
	ext := hpa.Spec.Metrics[0].External
	if ext.Metric.Name != "headroom_replicas_desired" || ext.Metric.Selector == nil || ext.Metric.Selector.MatchLabels["pool"] == "" {
		t.Errorf("HPA %s: metric %s selecting %v, want headroom_replicas_desired of a pool", hpa.Name, ext.Metric.Name, ext.Metric.Selector)
	}
	if ext.Target.Type != autoscalingv2.AverageValueMetricType || ext.Target.AverageValue == nil || ext.Target.AverageValue.String() != "1" {
		t.Errorf("HPA %s: target %+v: the replicas would not be the signal's value", hpa.Name, ext.Target)
	}
	if b := hpa.Spec.Behavior; b == nil || b.ScaleDown == nil || len(b.ScaleDown.Policies) != 1 || b.ScaleDown.Policies[0].Value != 1 {
		t.Errorf("HPA %s: scale-down should take one replica at a time", hpa.Name)
	}
}

func checkAdapter(t *testing.T, cm corev1.ConfigMap, recorded map[string]bool) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(cm.Data["config.yaml"]))
	dec.KnownFields(true)
	var c adapterConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("ConfigMap %s: config.yaml: %v", cm.Name, err)
	}
	if len(c.ExternalRules) != 1 {
		t.Fatalf("ConfigMap %s: %d external rules, want 1", cm.Name, len(c.ExternalRules))
	}
	r := c.ExternalRules[0]
	if r.Resources.Namespaced == nil || *r.Resources.Namespaced {
		t.Errorf("ConfigMap %s: the series has no namespace label; the rule must not be namespaced", cm.Name)
	}
	checkQuery(t, "the adapter's seriesQuery", r.SeriesQuery, recorded)
	name := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(r.SeriesQuery)
	if !regexp.MustCompile(r.Name.Matches).MatchString(name) || r.Name.As != "headroom_replicas_desired" {
		t.Errorf("ConfigMap %s: %s is not served as headroom_replicas_desired (%+v)", cm.Name, name, r.Name)
	}
	// What the adapter sends for the HPA's selector.
	q := strings.NewReplacer("<<.Series>>", name, "<<.LabelMatchers>>", `pool="llama"`, "<<.GroupBy>>", "pool").Replace(r.MetricsQuery)
	if pool := checkQuery(t, "the adapter's metricsQuery", q, recorded); pool != "llama" {
		t.Errorf("ConfigMap %s: the metrics query %q does not select the HPA's pool", cm.Name, q)
	}
}
