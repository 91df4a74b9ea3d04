// Package buildinfo fills prometheus/common/version from the binary's own
// build information where no -ldflags set it. `go build` in a git checkout
// stamps the main module's version (from Go 1.24: the tag, or a
// pseudo-version of the commit, +dirty when the tree had changes) and the
// commit; version computes the revision from it, but not the version, and a
// plain build showed "version=" on the landing page and in `headroom version`.
package buildinfo

import (
	"runtime/debug"
	"strings"

	"github.com/prometheus/common/version"
)

// Fill sets version.Version and version.BuildDate from the build
// information where they are empty: "devel" for a build that stamped no
// version (`go run`, or -buildvcs=false).
func Fill() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if version.Version == "" {
		// "(devel)": `go run`, or a build without VCS stamping.
		version.Version = strings.Trim(bi.Main.Version, "()")
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.time" && version.BuildDate == "" {
			version.BuildDate = s.Value
		}
	}
}
