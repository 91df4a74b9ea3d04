package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// headroomBinary builds cmd/headroom once for the package's tests, with a
// plain `go build` in the checkout as a user runs it, so that it carries
// what that build stamps (the VCS revision and version).
func headroomBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "headroom-e2e"); buildErr != nil {
			return
		}
		// -buildvcs=true is go build's default (auto) in a checkout, made
		// explicit: a machine's go env can turn it off.
		out, err := exec.Command("go", "build", "-buildvcs=true", "-o", filepath.Join(buildDir, "headroom"), "../cmd/headroom").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "headroom")
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + string(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// A `go build` from a git checkout says what it is: `headroom version` and
// the landing page show the module version Go stamped from the commit and
// the commit itself, not "version=" and "revision=unknown"; the landing
// page also names what is probed and links the status page and the docs.
func TestVersionFromVCS(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout: a build carries no revision to check")
	}
	bin := headroomBinary(t)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("headroom version: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`^headroom, version (\S+) \(branch: [^,]*, revision: ([0-9a-f]{40})(-modified)?\)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("headroom version printed\n%s\nwant a version and a 40-digit revision", out)
	}
	if rev := strings.TrimSpace(string(head)); m[2] != rev {
		t.Errorf("revision %s, want HEAD %s", m[2], rev)
	}
	if !strings.HasPrefix(m[1], "v") {
		t.Errorf("version %q, want the module version Go stamps (v...)", m[1])
	}

	addr := freePort(t)
	start(t, filepath.Join(t.TempDir(), "serve.log"), bin, "serve", "--config.file=testdata/version.yml", "--web.listen-address="+addr)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if !strings.Contains(page, "version="+m[1]) || !strings.Contains(page, "revision="+m[2]) {
		t.Errorf("the landing page does not show version %s and revision %s:\n%s", m[1], m[2], page)
	}
	// What is probed, and the way to the status page and the docs.
	for _, want := range []string{"nowhere: http://127.0.0.1:9", `href="/status"`, "tree/main/docs"} {
		if !strings.Contains(page, want) {
			t.Errorf("the landing page lacks %s", want)
		}
	}
}
