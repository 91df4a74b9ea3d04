// Command gen copies the alert rules and dashboards into the deployment
// trees and wraps the rules in a PrometheusRule for the kustomize base. Run it
// with `go generate ./deploy`.
package main

import (
	"fmt"
	"os"

	"github.com/headroom-dev/headroom/deploy/copies"
)

func main() {
	files, err := copies.Expected("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, f := range files {
		if err := os.WriteFile(f.Path, f.Data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
