package suite_test

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/gpustate/gpustate/analyzers/suite"
)

// factTypes returns the fact types of the analyzers and of everything they
// require, each once, keyed by type.
func factTypes(analyzers []*analysis.Analyzer) map[reflect.Type]string {
	types := make(map[reflect.Type]string)
	seen := make(map[*analysis.Analyzer]bool)
	var visit func(a *analysis.Analyzer)
	visit = func(a *analysis.Analyzer) {
		if seen[a] {
			return
		}
		seen[a] = true
		for _, f := range a.FactTypes {
			types[reflect.TypeOf(f)] = a.Name
		}
		for _, r := range a.Requires {
			visit(r)
		}
	}
	for _, a := range analyzers {
		visit(a)
	}
	return types
}

// TestFactsDeterministic checks that every fact the analyzers export
// gob-encodes to the same bytes each time. Drivers that cache analysis
// results on the bytes of facts (Bazel's nogo, go vet's action IDs) would
// otherwise redo work, or see a changed input, on every build. The facts
// come from analyzing the examples, the kvcache misuse included, where
// every fact type occurs.
func TestFactsDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and analyzes the examples")
	}
	analyzers := suite.Analyzers()
	want := factTypes(analyzers)
	if len(want) == 0 {
		t.Fatal("the analyzers declare no fact types")
	}
	pkgs, err := packages.Load(&packages.Config{
		Mode:       packages.LoadAllSyntax,
		BuildFlags: []string{"-tags=statevet_demo"},
	}, "github.com/gpustate/gpustate/examples/...",
		// The examples hold no //state:extern lines: a contracts package does.
		"./testdata/src/mlcontracts")
	if err != nil {
		t.Fatal(err)
	}
	graph, err := checker.Analyze(analyzers, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[reflect.Type]int)
	check := func(where string, fact analysis.Fact) {
		typ := reflect.TypeOf(fact)
		if _, ok := want[typ]; !ok {
			t.Errorf("%s: fact of type %v, which no analyzer declares in FactTypes", where, typ)
			return
		}
		seen[typ]++
		first := encode(t, fact)
		// Maps encode in iteration order, which differs from run to run:
		// one repeat could agree by chance, several hardly.
		for range 8 {
			if again := encode(t, fact); !bytes.Equal(first, again) {
				t.Errorf("%s: %v fact %v encodes to different bytes:\n%x\n%x", where, typ, fact, first, again)
				return
			}
		}
	}
	for act := range graph.All() {
		if act.Err != nil {
			t.Fatalf("%v: %v", act, act.Err)
		}
		for _, f := range act.AllObjectFacts() {
			check(fmt.Sprintf("%v on %v", act, f.Object), f.Fact)
		}
		for _, f := range act.AllPackageFacts() {
			check(fmt.Sprintf("%v on package %s", act, f.Package.Path()), f.Fact)
		}
	}
	t.Logf("facts checked, by type: %v", seen)
	var missing []string
	for typ, name := range want {
		if seen[typ] == 0 {
			missing = append(missing, fmt.Sprintf("%v (%s)", typ, name))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("no fact of these types occurs in the examples, so their encoding goes unchecked: %v", missing)
	}
}

// encode gob-encodes fact as the analysis drivers do: through an interface,
// its concrete type registered.
func encode(t *testing.T, fact analysis.Fact) []byte {
	t.Helper()
	gob.Register(fact)
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(struct{ Fact analysis.Fact }{fact}); err != nil {
		t.Fatalf("gob-encoding %T: %v", fact, err)
	}
	return buf.Bytes()
}
