package report

import (
	"bytes"
	"go/ast"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpustate/gpustate/contract"
	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/gen/internal/gentest"
	"github.com/gpustate/gpustate/placement"
)

// load loads gen's golden package ../testdata/src/name.
func load(t *testing.T, name string) *gen.Package {
	t.Helper()
	return gentest.LoadOne(t, gen.Load, "../testdata", name)
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	gentest.Golden(t, path, got)
}

// TestGolden checks the report of each golden package against its file.
func TestGolden(t *testing.T) {
	for _, name := range []string{"kv", "grid", "clash", "ring", "prefix"} {
		t.Run(name, func(t *testing.T) {
			var rep bytes.Buffer
			if err := Write(&rep, []*gen.Package{load(t, name)}); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("..", "testdata", name+".report.md"), rep.Bytes())
		})
	}
}

// TestReportHistory checks the report of state types with checkpoints
// against its golden file.
func TestReportHistory(t *testing.T) {
	p := load(t, "history")
	for _, d := range p.Contracts.Diagnostics {
		t.Errorf("%s: %s", p.Fset.Position(d.Pos), d.Message)
	}
	var rep bytes.Buffer
	if err := Write(&rep, []*gen.Package{p}); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("..", "testdata", "history.report.md"), rep.Bytes())
	for _, want := range []string{
		"| checkpoints and reconstruction | budget 65536 bytes (64 KiB), keep 3. History is kept with a checkpoint whenever the writes since the last one reach 65536 bytes (64 KiB), the last 3 kept, so rebuilding any retained version replays at most 64 KiB of deltas;",
		"The head takes a checkpoint whenever the deltas written since the last one reach 64 KiB, and keeps the last 3",
		// Heat rewrites 16 KiB a version: a checkpoint every 4 versions.
		"the budget of 64 KiB is reached every 4 versions",
		"| 3 | 48 KiB | 224 KiB | 40 KiB | 0, 4, 8 | the declared policy: budget 64 KiB, about every 4 versions |",
		// Tiny writes more than its budget at every version.
		"| 2 | 4 KiB | 6 KiB | 2 KiB | 0, 1 | least cost; the declared policy: budget 100 B, about every version |",
		// Spool's 1024 rows of 8 bytes, over a window of 4 spacings of 2 KiB;
		// a checkpoint holds one block of 128 rows (1 KiB) as the runtime
		// holds them.
		"At 8 B a version, the budget of 2 KiB is reached every 256 versions",
		"| 4 | 4 KiB | 259.8 KiB | 2.0 KiB | 0, 256, 512, 768 | the declared policy: budget 2 KiB, about every 256 versions |",
		// Heat's deltas: 11 of the window's 12 versions, each rewriting all 16 KiB, dwarf its
		// checkpoints; Spool's one-row deltas take a 256-byte block each.
		"The window's 11 deltas (one per version after its oldest checkpoint) are kept whatever the placement (16 KiB each, 176 KiB in all)",
		"With the window's deltas (176 KiB) the history holds 224 KiB, 14x the 16 KiB the state itself holds at its bound.",
		"With the window's deltas (255.8 KiB) the history holds 259.8 KiB, 32x the 8 KiB",
		// Ring's budget is past the runtime's cap.
		"so the runtime's cap decides: the chart takes a checkpoint every 1024 versions",
		// Trace keeps a spacing in versions.
		"the last 401 to 500 versions of its line are reconstructable",
	} {
		if !strings.Contains(rep.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestBudgetSpacing checks the spacing in versions the report estimates
// for a checkpoint policy spaced by bytes: the runtime takes a checkpoint
// when the deltas since the last one reach the budget.
func TestBudgetSpacing(t *testing.T) {
	mutable := func(bound, rowBytes int64) *contract.Contract {
		return &contract.Contract{Growth: contract.GrowthMutable, Bound: bound, Fields: []contract.Field{{RowBytes: rowBytes}}}
	}
	appends := func(bound, rowBytes int64) *contract.Contract {
		return &contract.Contract{Growth: contract.GrowthAppend, Bound: bound, Fields: []contract.Field{{RowBytes: rowBytes}}}
	}
	unbounded := &contract.Contract{Growth: contract.GrowthAppend, Unbounded: true, Fields: []contract.Field{{RowBytes: 8}}}
	for _, tc := range []struct {
		name         string
		c            *contract.Contract
		budget       int64
		keep         int
		every        int
		capped       bool
		versionBytes int64
	}{
		// 16 KiB a version: a 64 KiB budget is reached at the 4th.
		{"mutable exact", mutable(1024, 16), 64 << 10, 3, 4, false, 16 << 10},
		// 3 versions of 100 bytes stay under 301 bytes; the 4th reaches it.
		{"mutable rounds up", mutable(10, 10), 301, 2, 4, false, 100},
		{"budget under one version", mutable(256, 8), 100, 2, 1, false, 2048},
		{"unbounded", unbounded, 800, 2, 100, false, 8},
		{"unbounded capped", unbounded, 1 << 20, 2, placement.MaxSpacing, true, 8},
		// One row of 8 bytes a version fills the bound of 1024 rows over
		// 4 spacings of 256 versions: consistent.
		{"append consistent", appends(1024, 8), 2 << 10, 4, 256, false, 8},
		// 4 checkpoints of 1 KiB cover 4 KiB of the 8 KiB bound only when
		// each version writes the whole window's share: one version each.
		{"append collapses", appends(1024, 8), 1 << 10, 4, 1, false, 2048},
		{"no row bytes", appends(8, 0), 1, 1, placement.MaxSpacing, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Checkpoint = &contract.Checkpoint{Budget: tc.budget, Keep: tc.keep}
			every, capped := budgetSpacing(tc.c)
			if every != tc.every || capped != tc.capped {
				t.Fatalf("budgetSpacing = %d, %v; want %d, %v", every, capped, tc.every, tc.capped)
			}
			if got := versionBytes(tc.c, int64(every)*int64(tc.keep)); got != tc.versionBytes {
				t.Errorf("versionBytes at the spacing = %d, want %d", got, tc.versionBytes)
			}
			// The spacing is consistent: fewer versions would stay under
			// the budget, and the estimate reaches it (unless capped).
			if apply := versionBytes(tc.c, int64(every)*int64(tc.keep)); !capped && apply > 0 {
				if int64(every)*apply < tc.budget || int64(every-1)*apply >= tc.budget {
					t.Errorf("%d versions of %d bytes do not first reach the budget %d", every, apply, tc.budget)
				}
			}
		})
	}
}

// TestChartExact checks that the grouped chain placement.Pareto solves charges
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
		front, err := placement.Pareto(ch.chain)
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
			cv := ch.versions(placement.Placement{Checkpoints: ch.canonical(len(vs))})
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
		if w, why, ok := historyWorkload(c, 0); ok || why == "" {
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
	f.Add("//state:contract\n//state:growth append bound=1<<62\n//state:owner s\n//state:checkpoint budget=1<<62 keep=1<<30", "A []int64 `state:\"width=1024\"`")
	f.Add("//state:contract\n//state:growth mutable bound=1<<40\n//state:owner s\n//state:checkpoint keep=3 budget=1", "A []int64")
	f.Add("//state:contract\n//state:growth append bound=1000\n//state:owner s\n//state:checkpoint budget=777 keep=3", "A []uint8\nB [][3]float32")
	f.Add("//state:contract\n//state:growth mutable bound=K\n//state:owner s\n//state:snapshot none\n//state:checkpoint every=2 keep=2", "A []int16")
	f.Add("//state:contract\n//state:growth append bound=4096\n//state:owner s\n//state:checkpoint every=4096 keep=4096", "A []float64 `state:\"width=8192\"`")
	f.Fuzz(func(t *testing.T, directives, fields string) {
		p := fuzzPackage(directives, fields)
		if p == nil {
			return
		}
		var rep bytes.Buffer
		start := time.Now()
		if err := Write(&rep, []*gen.Package{p}); err != nil {
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

// fuzzPackage wraps gentest's fuzzed one-file package as gen does; nil
// when the source does not parse.
func fuzzPackage(directives, fields string) *gen.Package {
	src, ok := gentest.FuzzSource(directives, fields)
	if !ok {
		return nil
	}
	return gen.NewPackage(".", src.Fset, []*ast.File{src.File}, src.Pkg, src.Info)
}
