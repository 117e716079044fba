package main

import (
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/analysis/passes/lostcancel"
	"golang.org/x/tools/go/packages"

	"github.com/gpustate/gpustate/analyzers/stcontract"
	"github.com/gpustate/gpustate/analyzers/stgrowth"
)

// BenchmarkAnalysis times the analysis work alone (packages parsed and
// type-checked once, outside the timing) on net/http and every package it
// imports, none of which has directives: lostcancel (with the CFGs of
// ctrlflow it requires) is the reference; stcontract+stgrowth is what the
// directive language costs; statevet is the whole suite.
func BenchmarkAnalysis(b *testing.B) {
	pkgs, err := packages.Load(&packages.Config{Mode: packages.LoadAllSyntax}, "net/http")
	if err != nil {
		b.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		b.Fatal("net/http does not load")
	}
	for _, bc := range []struct {
		name      string
		analyzers []*analysis.Analyzer
	}{
		{"lostcancel", []*analysis.Analyzer{lostcancel.Analyzer}},
		{"stcontract+stgrowth", []*analysis.Analyzer{stcontract.Analyzer, stgrowth.Analyzer}},
		{"statevet", suite},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				g, err := checker.Analyze(bc.analyzers, pkgs, &checker.Options{Sequential: true})
				if err != nil {
					b.Fatal(err)
				}
				if bc.name != "lostcancel" {
					for act := range g.All() {
						if len(act.Diagnostics) > 0 {
							b.Fatalf("%s reports on %s: %s", act.Analyzer.Name, act.Package.PkgPath, act.Diagnostics[0].Message)
						}
					}
				}
			}
		})
	}
}
