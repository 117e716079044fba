package store

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestMergeStampsTheUseClock: Merge prepares both heads as every call
// does (prepareLocked), so the head merged into counts as just used:
// under memory pressure the least recently used head is evicted, not the
// one a merge has just moved.
func TestMergeStampsTheUseClock(t *testing.T) {
	p := smallPool(t, 8, nil)
	a := must[*Head](t)(p.NewHead(wide("Cache", Optional), "a"))
	fill(t, a, 2, 10)
	child := must[*Head](t)(a.Branch())
	fill(t, child, 1, 20)
	b := must[*Head](t)(p.NewHead(wide("Cache", Optional), "b"))
	fill(t, b, 3, 30) // b is used after a
	check(t, a.Merge(child))
	check(t, child.Release())
	// a and b hold three blocks each, two are free: the third row of m
	// evicts one of them.
	m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), "m"))
	fill(t, m, 3, 40)
	if err := b.Read(0, 1, [][]byte{make([]byte, 256)}); !errors.Is(err, ErrEvicted) {
		t.Errorf("b, used before the merge into a: read %v, want ErrEvicted", err)
	}
	got := make([]byte, 3*256)
	if err := a.Read(0, 3, [][]byte{got}); err != nil {
		t.Fatalf("a, merged into last: %v, want its rows", err)
	}
	if want := catWide(wideRow(10), wideRow(11), wideRow(20)); string(got) != string(want) {
		t.Error("a's rows after the merge differ from the child's")
	}
	check(t, m.Release())
	check(t, a.Release())
	check(t, b.Release())
}

// TestMergeRegistersKernelRows: Merge registers the blocks that rows a
// kernel wrote filled, as every other call's preparation does, so a
// prefix a branch's kernel wrote is adoptable once the branch is merged.
func TestMergeRegistersKernelRows(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := prompt(4, 64)
	toks := tokens(5, 9)
	a := must[*Head](t)(p.NewSharedHead(l, "a", "d"))
	child := must[*Head](t)(a.Branch())
	spans := must[[][]device.Span](t)(child.AppendDevice(9))
	kernelFill(t, p.Backend(), spans, promptRows(toks, 0, 9), []int{32, 4})
	check(t, a.Merge(child))
	b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
	n := must[int](t)(b.AdoptPrefix(keyBytes(toks)))
	if n != 8 {
		t.Fatalf("after the merge, adopted %d rows, want 8", n)
	}
	samePrompt(t, "adopted rows", readPrompt(t, b), promptRows(toks, 0, n))
	for _, h := range []*Head{a, b, child} {
		check(t, h.Release())
	}
}
