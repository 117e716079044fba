package codeshape

import (
	"flag"
	"fmt"
	"go/ast"
	"go/types"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// storeFeatures are the store's features and their files
// (docs/INTERNALS.md, "The store's map"); the package's other files are
// its core.
var storeFeatures = map[string][]string{
	"cost model": {"calibrate.go", "estimate.go"},
	"eviction":   {"evict.go", "evict_group.go", "evict_handles.go", "evict_joint.go"},
	"groups":     {"group.go", "group_at.go", "group_pending.go", "group_share.go"},
	"history":    {"checkpoint.go", "history.go", "replay.go"},
	"sharing":    {"share.go", "share_evict.go", "share_records.go"},
	"streams":    {"async.go", "blocktable.go", "fence.go", "stream.go", "stream_records.go"},
	"tier":       {"tier.go", "tier_move.go", "tier_records.go"},
}

// coreHandles are the core's types whose members a feature reaches.
var coreHandles = []string{"Head", "Snap", "Pool"}

var printReach = flag.Bool("reach.print", false, "print what each of the store's features reaches of the core, in the form of featureReach")

// TestFeatureReach checks that each of the store's features reaches the
// members of the core's handles (fields and methods declared in the
// core's files) that featureReach lists for it, and no others: a new name
// is a feature reaching into the core past what it was drawn with, to be
// added here on purpose, or to go through the part's own interface. A
// name listed and no longer used is to be struck.
func TestFeatureReach(t *testing.T) {
	got := storeReach(t)
	if *printReach {
		for _, f := range slices.Sorted(maps.Keys(got)) {
			fmt.Printf("\t%q: {%s},\n", f, quoteAll(got[f]))
		}
		return
	}
	for _, f := range slices.Sorted(maps.Keys(storeFeatures)) {
		want := featureReach[f]
		for _, n := range got[f] {
			if !slices.Contains(want, n) {
				t.Errorf("the %s feature reaches %s of the core, which featureReach does not list for it", f, n)
			}
		}
		for _, n := range want {
			if !slices.Contains(got[f], n) {
				t.Errorf("featureReach lists %s for the %s feature, which no longer uses it: strike it", n, f)
			}
		}
	}
}

// storeReach type-checks the store and returns, per feature, the sorted
// members of the core's handles its files select.
func storeReach(t *testing.T) map[string][]string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "runtime", "state", "internal", "store"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: dir}
	pkgs, err := packages.Load(cfg, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 || len(pkgs[0].Errors) > 0 {
		t.Fatalf("loading the store: %v", pkgs)
	}
	p := pkgs[0]
	featureOf := map[string]string{}
	for f, files := range storeFeatures {
		for _, name := range files {
			featureOf[name] = f
		}
	}
	seenFiles := map[string]bool{}
	reach := map[string]map[string]bool{}
	for _, file := range p.Syntax {
		name := filepath.Base(p.Fset.File(file.Pos()).Name())
		seenFiles[name] = true
		f, ok := featureOf[name]
		if !ok {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			s := p.TypesInfo.Selections[sel]
			if s == nil {
				return true
			}
			recv := handleName(s.Recv())
			if recv == "" {
				return true
			}
			if _, own := featureOf[filepath.Base(p.Fset.File(s.Obj().Pos()).Name())]; own {
				return true // a feature's own member, or another feature's
			}
			if reach[f] == nil {
				reach[f] = map[string]bool{}
			}
			reach[f][recv+"."+s.Obj().Name()] = true
			return true
		})
	}
	for name := range featureOf {
		if !seenFiles[name] {
			t.Errorf("storeFeatures lists %s, which the store no longer has", name)
		}
	}
	out := map[string][]string{}
	for f, names := range reach {
		out[f] = slices.Sorted(maps.Keys(names))
	}
	return out
}

// handleName returns the name of the store's core handle t is, or points
// to; "" for any other type (sync.Pool is not the store's Pool).
func handleName(t types.Type) string {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || !strings.HasSuffix(n.Obj().Pkg().Path(), "/runtime/state/internal/store") ||
		!slices.Contains(coreHandles, n.Obj().Name()) {
		return ""
	}
	return n.Obj().Name()
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// featureReach is what each feature reaches of the core's handles
// (TestFeatureReach; go test ./internal/codeshape -run FeatureReach
// -reach.print prints it as it is).
var featureReach = map[string][]string{
	"cost model": {"Head.blockBytes", "Head.cls", "Head.errorf", "Head.gate", "Head.hist", "Head.l", "Head.lin", "Head.logicalOf", "Head.owner", "Head.perBlock", "Head.pool", "Head.rowBytes", "Head.shape", "Pool.allocOnce", "Pool.b", "Pool.calib", "Pool.calibNow", "Pool.free", "Pool.mem", "Pool.register", "Snap.gate", "Snap.inPool", "Snap.logical"},
	"eviction":   {"Head.evicted", "Head.group", "Head.hist", "Head.l", "Head.lru", "Head.mu", "Head.owner", "Head.parts", "Head.physical", "Head.pool", "Head.pos", "Head.r", "Head.released", "Head.tables", "Head.tier", "Pool.addLogical", "Pool.b", "Pool.cache", "Pool.evictedBytes", "Pool.evictions", "Pool.evictor", "Pool.free", "Pool.groups", "Pool.liveHandles", "Pool.mem", "Pool.pendingWait", "Pool.rec", "Pool.shortfall", "Pool.tier", "Snap.cut", "Snap.evicted", "Snap.gate", "Snap.l", "Snap.lastUse", "Snap.logical", "Snap.mu", "Snap.owner", "Snap.physical", "Snap.pool", "Snap.r", "Snap.released", "Snap.tables", "Snap.tier", "Snap.tmu"},
	"groups":     {"Head.Stats", "Head.async", "Head.branchLocked", "Head.commitVersion", "Head.committed", "Head.copyColumn", "Head.deviceRows", "Head.evicted", "Head.group", "Head.gshare", "Head.hist", "Head.id", "Head.invalid", "Head.l", "Head.lin", "Head.mu", "Head.parts", "Head.perBlock", "Head.pool", "Head.pos", "Head.prepareLocked", "Head.r", "Head.release", "Head.released", "Head.shareKey", "Head.snapshotLocked", "Pool.NewHead", "Pool.adopted", "Pool.b", "Pool.clock", "Pool.enterAt", "Pool.free", "Pool.groups", "Pool.leaveAt", "Snap.Release", "Snap.cut"},
	"history":    {"Head.allocCols", "Head.async", "Head.cls", "Head.errorf", "Head.evicted", "Head.evictedForGood", "Head.hist", "Head.l", "Head.lost", "Head.lru", "Head.moved", "Head.owner", "Head.perBlock", "Head.pool", "Head.pos", "Head.r", "Head.rowBytes", "Head.rowSum", "Head.rows", "Head.setLogical", "Head.spansInto", "Pool.allocIn", "Pool.b", "Pool.deltaSt", "Pool.free", "Pool.freeList", "Pool.mem", "Pool.rebuiltBytes", "Pool.rec", "Pool.takeFreed", "Pool.takeOne"},
	"sharing":    {"Head.async", "Head.commitVersion", "Head.committed", "Head.copyColumn", "Head.errorf", "Head.l", "Head.mu", "Head.owner", "Head.perBlock", "Head.pool", "Head.r", "Head.released", "Head.shape", "Head.share", "Head.shareMem", "Pool.adopted", "Pool.b", "Pool.cache", "Pool.free", "Pool.tier", "Pool.tierPx"},
	"streams":    {"Head.async", "Head.batchRows", "Head.checkAppend", "Head.committed", "Head.errorf", "Head.evicted", "Head.gate", "Head.mu", "Head.parts", "Head.perBlock", "Head.pool", "Head.prepareLocked", "Head.queueCopies", "Head.r", "Head.released", "Head.shape", "Head.writeFrom", "Pool.b", "Pool.enterAt", "Pool.leaveAt", "Pool.mem", "Pool.rec", "Pool.staging", "Pool.tables"},
	"tier":       {"Head.async", "Head.deviceRows", "Head.errorf", "Head.evicted", "Head.gate", "Head.group", "Head.gshare", "Head.hist", "Head.l", "Head.lru", "Head.moved", "Head.mu", "Head.owner", "Head.parts", "Head.pool", "Head.pos", "Head.r", "Head.released", "Head.shape", "Head.share", "Head.tables", "Head.tier", "Pool.addLogical", "Pool.allocIn", "Pool.evictedBytes", "Pool.evictions", "Pool.evictor", "Pool.free", "Pool.gate", "Pool.liveHandles", "Pool.pendingWait", "Pool.steps", "Pool.tier", "Pool.tierPx", "Pool.touch", "Snap.cut", "Snap.evicted", "Snap.gate", "Snap.l", "Snap.lastUse", "Snap.logical", "Snap.mu", "Snap.owner", "Snap.pool", "Snap.r", "Snap.released", "Snap.tier"},
}
