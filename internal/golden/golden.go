// Package golden compares test output with files under testdata/, for the
// tests of several packages. Run a test with -update to rewrite its files,
// then review the diff.
package golden

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Updating says whether the test run rewrites its golden files: a test
// whose output is no byte-for-byte match (a screenshot) writes it then.
func Updating() bool { return *update }

// Check fails t when got differs from the file at path, after rewriting the
// file under -update.
func Check(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from %s (run the test with -update, then review the diff):\n%s", path, got)
	}
}

// Shown fails t when the document at doc does not contain the golden file at
// path: a table in the docs must be one a run produced.
func Shown(t *testing.T, doc, path string) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(d, want) {
		t.Errorf("%s does not show %s: copy it again", doc, path)
	}
}
