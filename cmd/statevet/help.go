package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// usage prints how to run statevet.
func usage(w io.Writer) {
	fmt.Fprintf(w, `statevet checks Go code that declares or uses gpustate state.

Usage: statevet [-flag] [package...]

Run 'statevet help' for the analyzers and flags, 'statevet help NAME' for one analyzer.
`)
}

// help prints the analyzers and the flags, or the documentation of the
// analyzers named.
func help(w io.Writer, analyzers []*analysis.Analyzer, fs *flag.FlagSet, names []string) {
	if len(names) > 0 {
		for _, name := range names {
			found := false
			for _, a := range analyzers {
				if a.Name == name {
					found = true
					fmt.Fprintf(w, "%s: %s\n", a.Name, strings.TrimSpace(a.Doc))
				}
			}
			if !found {
				fmt.Fprintf(w, "statevet: no analyzer %q\n", name)
			}
		}
		return
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
}
