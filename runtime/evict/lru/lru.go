// Package lru is the default eviction policy of the state store: the
// least recently used state goes first.
package lru

import (
	"cmp"
	"slices"

	"github.com/gpustate/gpustate/runtime/evict"
)

// Policy ranks victims least recently used first; between two used at
// the same clock, the larger goes first.
type Policy struct{}

// New returns the least-recently-used policy.
func New() Policy { return Policy{} }

// Rank orders vs by LastUse, oldest first, then by Bytes, largest first.
func (Policy) Rank(vs []evict.Victim) {
	slices.SortStableFunc(vs, func(a, b evict.Victim) int {
		if c := cmp.Compare(a.LastUse, b.LastUse); c != 0 {
			return c
		}
		return cmp.Compare(b.Bytes, a.Bytes)
	})
}
