package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gpustate/gpustate/examples/gridsim/field"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// TestReportPricesHistory runs the history stategen's report prices for
// examples/gridsim's Field (a checkpoint every 8 versions, 4 kept; every
// version rewrites the 64 rows) and checks the report against the pool:
// the deltas the runtime keeps (PoolStats.HistoryBytes) reach the report's
// figure for the window's deltas once the window is full, and never pass
// it.
func TestReportPricesHistory(t *testing.T) {
	rep, err := os.ReadFile(filepath.Join(checkout(t), "examples", "gridsim", "field", "CONTRACTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`The window's (\d+) deltas \(one per version after its oldest checkpoint\) are kept whatever the placement \((\d+) KiB each, (\d+) KiB in all\)`).FindSubmatch(rep)
	if m == nil {
		t.Fatal("the report of Field does not price the window's deltas")
	}
	window, _ := strconv.Atoi(string(m[1]))
	each, _ := strconv.ParseInt(string(m[2]), 10, 64)
	total, _ := strconv.ParseInt(string(m[3]), 10, 64)
	each, total = each<<10, total<<10

	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := field.NewFieldState(p, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var most int64
	for v := 1; v <= 3*(window+1); v++ {
		cells := make([]float32, field.Side*field.Side)
		for i := range cells {
			cells[i] = float32(v)
		}
		if err := s.Write(0, field.Field{Cells: cells}); err != nil {
			t.Fatal(err)
		}
		h := p.Stats().HistoryBytes
		if h > total {
			t.Fatalf("after %d versions the history's deltas hold %d bytes, more than the report's %d", v, h, total)
		}
		most = max(most, h)
	}
	if most != total {
		t.Errorf("the history's deltas held at most %d bytes, the report prices the window's %d deltas of %d bytes at %d",
			most, window, each, total)
	}
}
