package report_test

import (
	"fmt"
	"strings"

	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/gen/report"
)

// The report of a package of state types (stategen -report does this): the
// Markdown, and the SVG chart of each checkpointed type's history, which the
// Markdown links to. Memory is priced at a pool's block size here: on a
// pool of 64 KiB blocks every delta of 8 rows takes a whole block per field,
// so the history of KVCache (511 deltas retained) dwarfs the state.
func ExampleRender() {
	pkgs, err := gen.Load("", "../testdata/src/kv")
	if err != nil {
		panic(err)
	}
	md, charts, err := report.Render(pkgs, report.Options{BlockBytes: 64 << 10, Charts: "CONTRACTS"})
	if err != nil {
		panic(err)
	}
	for _, c := range charts {
		fmt.Printf("%s, linked: %v\n", c.Name, strings.Contains(string(md), "]("+c.Name+")"))
	}
	for line := range strings.Lines(string(md)) {
		if _, rest, ok := strings.Cut(line, "With the window's deltas"); ok {
			fmt.Print("With the window's deltas" + rest)
		}
	}
	// Output:
	// CONTRACTS-kvcache.svg, linked: true
	// With the window's deltas (127.8 MiB) the history holds 129.8 MiB, 61x the 2.1 MiB the state itself holds at its bound.
}
