package main

import (
	"slices"
	"testing"
	"time"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/analysis/passes/lostcancel"
	"golang.org/x/tools/go/packages"

	"github.com/gpustate/gpustate/analyzers/stcontract"
	"github.com/gpustate/gpustate/analyzers/stgrowth"
)

// BenchmarkAnalysis times the analysis work alone (packages parsed and
// type-checked once, outside the timing) on net/http and every package it
// imports, none of which has directives. Every iteration runs, in turn,
// lostcancel (with the CFGs of ctrlflow it requires: the reference), the
// directive language (stcontract and stgrowth, with the directives analyzer)
// and the whole statevet suite, and the benchmark reports the medians over
// iterations of each one's time divided by lostcancel's in the same
// iteration, so that drift in the machine's load cancels out.
func BenchmarkAnalysis(b *testing.B) {
	pkgs, err := packages.Load(&packages.Config{Mode: packages.LoadAllSyntax}, "net/http")
	if err != nil {
		b.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		b.Fatal("net/http does not load")
	}
	runs := []struct {
		name      string
		analyzers []*analysis.Analyzer
	}{
		{"lostcancel", []*analysis.Analyzer{lostcancel.Analyzer}},
		{"contract", []*analysis.Analyzer{stcontract.Analyzer, stgrowth.Analyzer}},
		{"suite", suite},
	}
	var contractRatio, suiteRatio []float64
	for b.Loop() {
		var d [3]time.Duration
		for i, r := range runs {
			t0 := time.Now()
			g, err := checker.Analyze(r.analyzers, pkgs, &checker.Options{Sequential: true})
			d[i] = time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				continue
			}
			for act := range g.All() {
				if len(act.Diagnostics) > 0 {
					b.Fatalf("%s reports on %s: %s", act.Analyzer.Name, act.Package.PkgPath, act.Diagnostics[0].Message)
				}
			}
		}
		contractRatio = append(contractRatio, d[1].Seconds()/d[0].Seconds())
		suiteRatio = append(suiteRatio, d[2].Seconds()/d[0].Seconds())
	}
	b.ReportMetric(median(contractRatio), "contract/lostcancel")
	b.ReportMetric(median(suiteRatio), "suite/lostcancel")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
