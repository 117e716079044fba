package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// usage prints how to run statevet.
func usage(w io.Writer) {
	fmt.Fprintf(w, `statevet checks Go code that declares or uses gpustate state.

Usage: statevet [-flag] [package...]
       statevet help [NAME]
       statevet -version

Run 'statevet help' for the analyzers and flags, 'statevet help NAME' for one analyzer.
`)
}

// help prints the analyzers and the flags, or the documentation of the
// analyzers named, and returns the exit code: exitUsage, after saying so,
// when a name is no analyzer's (as go help does for an unknown topic).
func help(w, stderr io.Writer, analyzers []*analysis.Analyzer, fs *flag.FlagSet, names []string) int {
	if len(names) > 0 {
		code := exitClean
		for _, name := range names {
			i := slices.IndexFunc(analyzers, func(a *analysis.Analyzer) bool { return a.Name == name })
			if i < 0 {
				fmt.Fprintf(stderr, "statevet: no analyzer %q; run 'statevet help' for the list\n", name)
				code = exitUsage
				continue
			}
			fmt.Fprintf(w, "%s: %s\n", name, strings.TrimSpace(analyzers[i].Doc))
		}
		return code
	}
	fmt.Fprintf(w, "statevet checks Go code that declares or uses gpustate state.\n\n")
	fmt.Fprintf(w, "Usage: statevet [-flag] [package...]\n       go vet -vettool=\"$(go tool -n statevet)\" [package...]\n\n")
	fmt.Fprintf(w, "Registered analyzers:\n\n")
	width := 0
	for _, a := range analyzers {
		width = max(width, len(a.Name))
	}
	for _, a := range analyzers {
		title, _, _ := strings.Cut(strings.TrimSpace(a.Doc), "\n")
		fmt.Fprintf(w, "    %-*s %s\n", width, a.Name, title)
	}
	fmt.Fprintf(w, "\nBy default all analyzers run. To select some, use -NAME for each one,\nor -NAME=false to run all but those.\n\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	return exitClean
}
