package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
)

// A bad variable is the error of the commands that read it, not of every
// command (issue 39: HEADROOM_SHARD_COUNT=x made `headroom version` exit 2).
func TestEnvErrorsBelongToTheirCommand(t *testing.T) {
	t.Setenv("HEADROOM_SHARD_COUNT", "x")
	cfg := filepath.Join(t.TempDir(), "headroom.yml")
	if err := os.WriteFile(cfg, []byte("targets: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"version"}, 0},
		{[]string{"check-config", cfg}, 0},
		{[]string{"serve", "--config.file", cfg}, 2},
	} {
		if code := run(tc.args); code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
		}
	}
	if _, errs := readSettings(); len(errs) != 1 || errs["ShardCount"] == nil || errs["ShardCount"].Error() != `HEADROOM_SHARD_COUNT="x": want a value of type int` {
		t.Errorf("errors %v, want HEADROOM_SHARD_COUNT's naming the variable and its value", errs)
	}
	// The demo reads the web settings, and stops on theirs.
	t.Setenv("HEADROOM_WEB_ENABLE_LIFECYCLE", "maybe")
	if code := run([]string{"demo"}); code != 2 {
		t.Errorf("demo with HEADROOM_WEB_ENABLE_LIFECYCLE=maybe: exit %d, want 2", code)
	}
}

// The demo listens on loopback unless told otherwise; serve keeps every
// interface, where Prometheus scrapes it from another host.
func TestDemoListensOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		env, want string
	}{{"", "127.0.0.1:9835"}, {":9999", ":9999"}} {
		if tc.env != "" {
			t.Setenv("HEADROOM_WEB_LISTEN_ADDRESS", tc.env)
		}
		s, errs := readSettings()
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		app := kingpin.New("headroom", "")
		logCfg := &promslog.Config{}
		demo, serve := newDemoCmd(app, s, logCfg), newServeCmd(app, s, logCfg)
		if _, err := app.Parse([]string{"demo"}); err != nil {
			t.Fatal(err)
		}
		if _, err := app.Parse([]string{"serve"}); err != nil {
			t.Fatal(err)
		}
		if got := demo.web.listen; len(got) != 1 || got[0] != tc.want {
			t.Errorf("HEADROOM_WEB_LISTEN_ADDRESS=%q: the demo listens on %v, want %s", tc.env, got, tc.want)
		}
		if want := s.ListenAddress; serve.web.listen[0] != want || (tc.env == "" && want != ":9835") {
			t.Errorf("serve listens on %v, want %s", serve.web.listen, want)
		}
	}
}
