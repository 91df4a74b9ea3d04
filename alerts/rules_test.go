// Package alerts holds headroom's Prometheus rules; its tests run promtool and
// check the rules against the metric contract (internal/contract).
package alerts

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/internal/contract"
)

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found; .ci/run installs Debian's prometheus package")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	return p
}

func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "headroom.rules.yml"}, {"test", "rules", "headroom.rules.test.yml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestRulesUseOnlyContractMetrics(t *testing.T) {
	b, err := os.ReadFile("headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules := string(b)
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`record: (\S+)`).FindAllStringSubmatch(rules, -1) {
		recorded[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`headroom[_:][a-z0-9_:]+`).FindAllString(rules, -1) {
		if recorded[m] {
			continue
		}
		if !contract.Has(m) {
			t.Errorf("%s is neither in the metric contract nor a recording rule", m)
		}
	}
}

func TestEveryAlertHasARunbook(t *testing.T) {
	rules, err := os.ReadFile("headroom.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	book, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(string(book), "## "+m[1]) {
			t.Errorf("alert %s has no section in docs/runbooks.md", m[1])
		}
	}
	for _, a := range regexp.MustCompile(`runbook_url: \S+#(\S+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(strings.ToLower(string(book)), "## "+a[1]) {
			t.Errorf("runbook anchor #%s matches no heading", a[1])
		}
	}
}
