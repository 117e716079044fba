// Command statevet checks Go code that declares or uses gpustate state.
//
// It runs the statevet analyzers: stcontract (malformed or contradictory
// contracts), stgrowth (state that may grow without a bound), and the
// dataflow analyzers that check the code using state handles. Use it as a
// vet tool:
//
//	go get -tool github.com/gpustate/gpustate/cmd/statevet
//	go vet -vettool="$(go tool -n statevet)" ./...
//
// As the vet tool it also runs go vet's own default analyzers (printf,
// copylock and the rest), so nothing go vet reports is lost.
//
// or on its own:
//
//	statevet ./...
//	statevet -tags statevet_demo ./examples/...
//	statevet -json ./...
//	statevet -sarif ./... > statevet.sarif
//	statevet -fix ./...
//
// On its own it runs go vet with itself as the vet tool and only its own
// analyzers enabled (go vet -vettool=statevet -json -NAME...), so that the
// go command loads and type-checks the packages, analyzes one package per
// process and caches the results; statevet then prints what go vet
// reported. -tags passes build tags to go vet; -test=false drops the
// findings in test files (go vet always analyzes a package with its
// tests). -json prints the findings as go vet -json does, each finding
// once, under the package's own ID even where the test variant reported
// it. -sarif prints them as a SARIF 2.1.0 log for code scanning: one rule
// per analyzer, paths relative to the current directory. -fix applies the
// suggested fixes, prints a line for each one applied (file:line: what it
// changed), then reports the findings that remain and exits 3 if any do.
// Without -json or -sarif, the exit code is 0 with no findings, 3 with
// findings (as the go/analysis drivers exit), 1 when packages do not build
// or an analyzer fails, 2 for bad usage (an unknown flag, no packages,
// help for no such analyzer), as go vet and stategen exit.
//
// Text findings end with their analyzer's name, "(stcleanup)". A finding
// is silenced deliberately by a comment on its line or the line above:
// //statevet:ignore ANALYZER reason="why". The reason is required, and an
// ignore that silences nothing is itself a finding.
//
// "statevet help" lists the analyzers, "statevet help NAME" documents one.
// -version prints the version, -V=full the line go vet asks of a vet tool;
// stategen takes the same flags. Packages that neither declare //state: directives nor import a package
// that does are skipped after a byte scan of their comments.
package main

import (
	"os"
	"strings"

	"golang.org/x/tools/go/analysis/unitchecker"
)

func main() {
	if vetTool(os.Args[1:]) {
		unitchecker.Main(append(vetSuite, suite...)...) // does not return
	}
	os.Exit(standalone(os.Args[1:], suite, os.Stdout, os.Stderr))
}

// vetTool reports whether go vet runs statevet as its -vettool: it asks
// for the flags (-flags) or passes a .cfg file, or asks for the version
// (-V=full) beside other flags. The version flags alone are the standalone
// command's, which prints the -V=full line go vet expects (see
// version.Full).
func vetTool(args []string) bool {
	if len(args) == 1 {
		switch strings.TrimLeft(args[0], "-") {
		case "V", "V=full", "version":
			return false
		}
	}
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "V=full", "V", "flags":
			return true
		}
	}
	return len(args) > 0 && strings.HasSuffix(args[len(args)-1], ".cfg")
}
