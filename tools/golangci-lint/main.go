// Command golangci-lint is golangci-lint v2 with the statevet analyzers
// compiled in as module plugins (see package
// github.com/gpustate/gpustate/analyzers/golangci). It is built from the Go
// module proxy alone, without "golangci-lint custom", which clones
// golangci-lint from its git host:
//
//	make golangci-lint    # writes bin/golangci-lint-statevet
//
// Its own module keeps golangci-lint's dependencies out of gpustate's go.mod.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	_ "github.com/gpustate/gpustate/analyzers/golangci"
)

func main() {
	info := commands.BuildInfo{Version: "unknown", Commit: "?", Date: "(unknown)", GoVersion: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/golangci/golangci-lint/v2" {
				info.Version = strings.TrimPrefix(dep.Version, "v") + "+statevet"
			}
		}
	}
	if err := commands.Execute(info); err != nil {
		fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}
