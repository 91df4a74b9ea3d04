package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// .ci/run installs Debian's prometheus where it is missing, and stops the
// server the package starts: that one only, by its PID. Run in a sandbox
// whose apt-get starts a stand-in "prometheus", beside one that ran
// before; its pkill kills every stand-in, as pkill -x would every
// Prometheus on the host.
func TestCIStopsOnlyThePrometheusItStarted(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	for _, tool := range []string{"bash", "pgrep", "dirname", "nice"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	dir := t.TempDir()
	bin, fake := filepath.Join(dir, "bin"), filepath.Join(dir, "fake")
	for _, d := range []string{bin, fake} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of sleep named prometheus: pgrep -x and pkill -x see that name.
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	prom := filepath.Join(fake, "prometheus")
	if err := os.WriteFile(prom, b, 0o755); err != nil {
		t.Fatal(err)
	}
	pids := filepath.Join(dir, "pids") // every stand-in, for the fake pkill
	scripts := map[string]string{
		"go":        "exit 0",
		"id":        "echo 0",
		"systemctl": "exit 1", // a container: no systemd
		// The install returns once its stand-in runs under its name, as
		// a server the package started does: a child its shell has not
		// yet exec'd is named after the shell, and pgrep -x prometheus
		// missed it on a loaded machine (4 runs in 60).
		"apt-get": `case " $* " in *" install "*)
  ` + prom + ` 300 </dev/null >/dev/null 2>&1 &
  pid=$!
  while read comm 2>/dev/null </proc/$pid/comm && [ "$comm" != prometheus ]; do :; done
  echo $pid >> ` + pids + `
  echo $pid > ` + filepath.Join(dir, "installed") + ` ;;
esac`,
		"pkill": `while read p; do kill $p; done < ` + pids,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"bash", "pgrep", "dirname", "nice"} {
		path, _ := exec.LookPath(tool)
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	before := exec.Command(prom, "300")
	if err := before.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = before.Process.Kill(); _ = before.Wait() })
	if err := os.WriteFile(pids, []byte(strconv.Itoa(before.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	bash, _ := exec.LookPath("bash")
	cmd := exec.Command(bash, "../.ci/run")
	cmd.Env = []string{"PATH=" + bin, "HOME=" + dir, "CI=true"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf(".ci/run: %v\n%s", err, out)
	}
	b, err = os.ReadFile(filepath.Join(dir, "installed"))
	if err != nil {
		t.Fatalf(".ci/run installed nothing: %v\n%s", err, out)
	}
	installed, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { _ = syscall.Kill(installed, syscall.SIGKILL) })
	if !alive(before.Process.Pid) {
		t.Error(".ci/run stopped a Prometheus it did not start")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(installed) {
		if time.Now().After(deadline) {
			t.Fatal(".ci/run left the Prometheus its install started running")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive says whether pid runs: a zombie does not.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
