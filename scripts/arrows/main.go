// Command arrows prints a package's file plan (internal/fileplan): its
// files bottom-up and the arrows that run back up, from a file to one placed
// above it.
//
// Usage:
//
//	go run ./scripts/arrows [-max N] DIR
//
// With -max it exits 1 when more than N arrows run back up.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpustate/gpustate/internal/fileplan"
)

func main() {
	max := flag.Int("max", -1, "exit 1 when more than this many arrows run back up")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: arrows [-max N] DIR")
		os.Exit(2)
	}
	p, err := fileplan.Load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "arrows:", err)
		os.Exit(2)
	}
	fmt.Printf("%d files, %d arrows between them, %d running back up\n\nplan, bottom up:\n", len(p.Files), len(p.Arrows), len(p.Back))
	for i, f := range p.Files {
		fmt.Printf("%3d %s\n", i, f)
	}
	if len(p.Back) > 0 {
		fmt.Println("\narrows running back up:")
	}
	for _, a := range p.Back {
		fmt.Printf("  %s -> %s (%s)\n", a.From, a.To, a.Via)
	}
	if *max >= 0 && len(p.Back) > *max {
		os.Exit(1)
	}
}
