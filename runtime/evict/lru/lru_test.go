package lru

import (
	"testing"

	"github.com/gpustate/gpustate/runtime/evict"
)

func TestRankOldestFirstThenLargest(t *testing.T) {
	vs := []evict.Victim{
		{ID: 1, LastUse: 9, Bytes: 10},
		{ID: 2, LastUse: 3, Bytes: 10},
		{ID: 3, LastUse: 3, Bytes: 50},
		{ID: 4, LastUse: 7, Bytes: 1},
	}
	var p evict.Evictor = New()
	p.Rank(vs)
	want := []uint64{3, 2, 4, 1}
	for i, v := range vs {
		if v.ID != want[i] {
			t.Fatalf("rank %d: victim %d, want %d (order %v)", i, v.ID, want[i], vs)
		}
	}
}
