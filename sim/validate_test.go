package sim

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestValidateGolden pins the whole comparison with the reference reports: any
// change of model or profiles that moves a figure shows up here, and the
// table in docs/simulator.md is this file.
func TestValidateGolden(t *testing.T) {
	rs, err := Reports()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, r := range rs {
		p, err := LookupProfile(r.Profile)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "== %s (%s)\n", p.Name, r.File)
		PrintChecks(&b, r, Validate(p.Params, r))
		b.WriteString("\n")
	}
	const golden = "testdata/validate.golden"
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("validation table drifted from %s (run go test ./sim -run TestValidateGolden -update and review):\n%s", golden, b.String())
	}
}

// TestDocShowsGolden keeps the table in docs/simulator.md the one a run produced.
func TestDocShowsGolden(t *testing.T) {
	golden, err := os.ReadFile("testdata/validate.golden")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/simulator.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, golden) {
		t.Error("docs/simulator.md does not contain sim/testdata/validate.golden: copy the table again")
	}
}

func TestProfilesCoverEveryReport(t *testing.T) {
	rs, _ := Reports()
	for _, r := range rs {
		p, err := LookupProfile(r.Profile)
		if err != nil {
			t.Errorf("report %s has no profile: %v", r.File, err)
			continue
		}
		if p.Report != r.File {
			t.Errorf("profile %s says report %s, want %s", p.Name, p.Report, r.File)
		}
	}
}
