package gen

import (
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpustate/gpustate/contract"
	"github.com/gpustate/gpustate/runtime/state"
)

// TestReportHistory checks the report of state types with checkpoints
// against its golden file.
func TestReportHistory(t *testing.T) {
	p := load(t, "history")
	for _, d := range p.Contracts.Diagnostics {
		t.Errorf("%s: %s", p.Fset.Position(d.Pos), d.Message)
	}
	var rep bytes.Buffer
	if err := Report(&rep, []*Package{p}); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "history.report.md"), rep.Bytes())
	for _, want := range []string{
		"every 4, keep 3, budget 65536 bytes (64 KiB)",
		"The contract sets a budget of 64 KiB for checkpoint memory.",
		"best within the budget of 64 KiB",
		"No placement fits the budget of 100 B",
		"the last 9 to 12 versions of its line are reconstructable",
		"| 3 | 48 KiB | 40 KiB | 0, 4, 8 | the declared policy: every 4 versions |",
	} {
		if !strings.Contains(rep.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestChartExact checks that the grouped chain state.Pareto solves charges
// every placement exactly what it costs on the chain of versions, for
// windows that groups divide and windows they do not.
func TestChartExact(t *testing.T) {
	for _, w := range []workload{
		{window: 12, apply: 100, seed: 300, memory: 50},
		{window: 200, apply: 7, seed: 1000, memory: 9},
		{window: 131, apply: 1 << 20, seed: 1 << 20, memory: 1 << 20},
		{window: 1, apply: 5, seed: 5, memory: 5},
	} {
		ch := newChart(w)
		if len(ch.chain) > maxPlaces {
			t.Errorf("window %d: %d places, more than %d", w.window, len(ch.chain), maxPlaces)
		}
		front, err := state.Pareto(ch.chain)
		if err != nil {
			t.Fatal(err)
		}
		for i, pl := range front {
			vs := ch.versions(pl)
			if vs[0] != 0 {
				t.Errorf("window %d: placement %v does not start at the oldest version", w.window, vs)
			}
			if got, want := ch.expected(pl), w.expectedOf(vs); math.Abs(got-want) > 1e-6*want {
				t.Errorf("window %d: placement %v: charted %.3f, on the versions %.3f", w.window, vs, got, want)
			}
			cv := ch.versions(state.Placement{Checkpoints: ch.canonical(len(vs))})
			if len(cv) != len(vs) || cv[0] != 0 {
				t.Errorf("window %d: canonical placement %v for %v", w.window, cv, vs)
			} else if got, want := w.expectedOf(cv), w.expectedOf(vs); math.Abs(got-want) > 1e-6*want {
				t.Errorf("window %d: canonical placement %v costs %.3f, the front's %v %.3f", w.window, cv, got, vs, want)
			}
			if pl.Memory != int64(len(vs))*w.memory {
				t.Errorf("window %d: placement %v holds %d bytes, want %d", w.window, vs, pl.Memory, int64(len(vs))*w.memory)
			}
			if i > 0 && (pl.Memory <= front[i-1].Memory || pl.Expected >= front[i-1].Expected) {
				t.Errorf("window %d: the front is not by memory ascending and cost descending at %d", w.window, i)
			}
		}
	}
}

// TestHistoryWorkloadLimits checks that huge states and windows are
// refused with a reason, never charted with overflowing figures.
func TestHistoryWorkloadLimits(t *testing.T) {
	f := []contract.Field{{Name: "X", Elem: "float64", ElemSize: 8, Width: 1 << 20, RowBytes: 8 << 20}}
	for _, c := range []*contract.Contract{
		{Growth: contract.GrowthMutable, Bound: math.MaxInt64 / 2, Fields: f, Checkpoint: &contract.Checkpoint{Every: 4, Keep: 4}},
		{Growth: contract.GrowthAppend, Bound: 1 << 40, Fields: f, Checkpoint: &contract.Checkpoint{Every: 1 << 30, Keep: 1 << 30}},
		{Growth: contract.GrowthAppend, Bound: 10, Fields: f, Checkpoint: &contract.Checkpoint{Keep: 3}},
	} {
		if w, why, ok := historyWorkload(c); ok || why == "" {
			t.Errorf("%+v: charted %+v, want a refusal", c, w)
		}
	}
}

func TestPickRows(t *testing.T) {
	for _, n := range []int{1, 5, maxChartRows, maxChartRows + 1, 64, 500} {
		for _, extra := range []int{-1, 0, n / 3, n - 1} {
			rows := pickRows(n, extra, n/2)
			if len(rows) != min(n, maxChartRows) {
				t.Errorf("pickRows(%d, %d) shows %d rows", n, extra, len(rows))
			}
			has := func(i int) bool {
				for _, r := range rows {
					if r == i {
						return true
					}
				}
				return false
			}
			if !has(0) || !has(n-1) || (extra >= 0 && !has(extra)) || !has(n/2) {
				t.Errorf("pickRows(%d, %d) = %v misses an end or the extra row", n, extra, rows)
			}
			for i := 1; i < len(rows); i++ {
				if rows[i] <= rows[i-1] {
					t.Errorf("pickRows(%d, %d) = %v is not ascending", n, extra, rows)
				}
			}
		}
	}
}

func TestPlacementText(t *testing.T) {
	for _, c := range []struct {
		vs   []int
		want string
	}{
		{[]int{0}, "0"},
		{[]int{0, 8}, "0, 8"},
		{[]int{0, 8, 16, 24, 32}, "every 8 versions from 0 to 32"},
		{[]int{0, 1, 2, 3, 4, 5}, "every version from 0 to 5"},
		{[]int{0, 8, 24, 32, 40, 56, 64}, "0, 8, 24, ..., 40, 56, 64"},
	} {
		if got := placementText(c.vs); got != c.want {
			t.Errorf("placementText(%v) = %q, want %q", c.vs, got, c.want)
		}
	}
}

// FuzzReport feeds arbitrary contracts to the report: whatever the input,
// it writes Markdown, quickly, and never panics, whether the contract is
// valid or not and whatever its bound, widths and checkpoint policy.
func FuzzReport(f *testing.F) {
	f.Add("//state:contract\n//state:growth mutable bound=1<<40\n//state:owner s\n//state:checkpoint every=1<<20 keep=1<<10 budget=1<<62", "A []int64 `state:\"width=1024\"`")
	f.Add("//state:contract\n//state:growth append bound=unbounded reason=\"r\"\n//state:owner s\n//state:checkpoint every=3 keep=7", "A []uint8\nB [][3]float32")
	f.Add("//state:contract\n//state:growth append bound=5\n//state:owner s\n//state:checkpoint every=1 keep=1 budget=1", "A []int16")
	f.Add("//state:contract\n//state:growth mutable bound=K\n//state:owner s\n//state:snapshot none\n//state:checkpoint every=2 keep=2", "A []int16")
	f.Add("//state:contract\n//state:growth append bound=4096\n//state:owner s\n//state:checkpoint every=4096 keep=4096", "A []float64 `state:\"width=8192\"`")
	f.Fuzz(func(t *testing.T, directives, fields string) {
		src := "package p\n\nconst K = 16\n\n// T is fuzzed.\n//\n" + directives + "\ntype T struct {\n" + fields + "\n}\n"
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
		if err != nil {
			return
		}
		info := &types.Info{
			Types: make(map[ast.Expr]types.TypeAndValue),
			Defs:  make(map[*ast.Ident]types.Object),
			Uses:  make(map[*ast.Ident]types.Object),
		}
		conf := types.Config{Importer: importer.Default(), Error: func(error) {}}
		pkg, _ := conf.Check("example.com/p", fset, []*ast.File{file}, info)
		p := newPackage(".", fset, []*ast.File{file}, pkg, info)
		var rep bytes.Buffer
		start := time.Now()
		if err := Report(&rep, []*Package{p}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the report took %v", d)
		}
		if !strings.HasPrefix(rep.String(), "# State contracts") {
			t.Fatalf("not a report:\n%s", rep.String())
		}
	})
}
