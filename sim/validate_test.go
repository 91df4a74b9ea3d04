package sim

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/headroom-dev/headroom/internal/golden"
)

// TestValidateGolden pins the whole comparison with the reference reports: any
// change of model or profiles that moves a figure shows up here, and the
// table in docs/simulator.md is this file. Every judged figure must be within
// its tolerance, as `headroom sim validate --all` requires.
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
		checks := Validate(p.Params, r)
		for _, c := range checks {
			if !c.OK {
				t.Errorf("%s: %s: report %g, simulated %.4g (%+.1f%%), outside %s", r.File, c.Name, c.Report, c.Simulated, 100*c.Err, c.Tolerance)
			}
		}
		PrintChecks(&b, r, checks)
		b.WriteString("\n")
	}
	golden.Check(t, "testdata/validate.golden", b.Bytes())
}

// TestDocShowsGolden keeps the table in docs/simulator.md the one a run produced.
func TestDocShowsGolden(t *testing.T) {
	golden.Shown(t, "../docs/simulator.md", "testdata/validate.golden")
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
