// Command gen writes the dashboards' JSON; run it with `go generate ./dashboards`.
package main

import (
	"fmt"
	"os"

	"github.com/headroom-dev/headroom/dashboards"
)

func main() {
	for name, b := range dashboards.All() {
		out, err := dashboards.JSON(b)
		if err == nil {
			err = os.WriteFile(name, out, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
