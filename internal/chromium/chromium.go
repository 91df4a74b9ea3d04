// Package chromium starts headless Chromium for the tests that look at
// what headroom draws (the bench report's charts, the status page).
package chromium

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser finds Debian's chromium (installed by .ci/run). Without it the
// test is skipped, except in CI, where a missing browser is a failure.
func Browser(t *testing.T) string {
	t.Helper()
	if p := find(); p != "" {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI: no chromium on PATH; .ci/run installs Debian's chromium package")
	}
	t.Skip("no chromium on PATH (apt-get install -y chromium)")
	return ""
}

// Available says whether a browser is installed, for a test that checks a
// page as one of its parts and goes on without it outside CI.
func Available() bool { return find() != "" || os.Getenv("CI") != "" }

func find() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// limit bounds a test's whole use of its browser. It is there to stop a
// browser that hangs, not to time one: a page renders here in seconds, but
// .ci/run's race step runs at nice 10, and beside another job at normal
// priority its Chromium took past two minutes to launch and draw bench's
// report (TestHTMLChartsDrawInChromium, 2026-11-28). go test's -timeout
// bounds the rest.
const limit = 10 * time.Minute

// Context is a chromedp context on a fresh headless browser with a window
// of w x h, ended with the test or after limit.
func Context(t *testing.T, w, h int) context.Context {
	t.Helper()
	exe := Browser(t)
	// Chromium's helper processes can still write to the profile after the
	// browser exits, which fails t.TempDir's cleanup: the profile gets its
	// own directory, removed on a best-effort basis after the browser.
	profile, err := os.MkdirTemp("", "headroom-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(w, h), chromedp.UserDataDir(profile))
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, limit)
	t.Cleanup(func() {
		cancel()
		cancelCtx()
		cancelAlloc()
		os.RemoveAll(profile)
	})
	return ctx
}
