// Command statevet checks Go code that declares or uses gpustate state.
//
// It runs the statevet analyzers: stcontract (malformed or contradictory
// contracts), stgrowth (state that may grow without a bound), and the
// dataflow analyzers that check the code using state handles. Use it as a
// vet tool:
//
//	go install github.com/gpustate/gpustate/cmd/statevet@latest
//	go vet -vettool=$(command -v statevet) ./...
//
// or on its own, where it also accepts -json (diagnostics as JSON) and -fix
// (apply suggested fixes):
//
//	statevet ./...
//	statevet -fix ./...
//
// "statevet help" lists the analyzers, "statevet help NAME" documents one.
// Packages that neither declare //state: directives nor import a package
// that does are skipped after a byte scan of their comments.
package main

import "golang.org/x/tools/go/analysis/multichecker"

func main() { multichecker.Main(suite...) }
