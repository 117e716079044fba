// Package placement chooses which versions of a line of versions to keep
// as checkpoints: the placements that no other beats in both checkpoint
// memory and expected reconstruction cost (Pareto), and the cheapest one
// under a memory budget (Place). It also holds the rules of checkpoint
// spacing that runtime/state applies and that stategen's report assumes,
// so that the two state them once.
//
// It imports only the standard library: the report links it without the
// device layer.
package placement

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// MaxSpacing is the most versions a head lets pass between two checkpoints
// of a policy spaced by bytes (a budget), however few bytes they write, so
// that writes of few bytes do not grow history unbounded.
const MaxSpacing = 1024

// DefaultBlockBytes is the block size of a pool made with no block size:
// runtime/state allocates it, and the report assumes it.
const DefaultBlockBytes = 64 << 10

// ChainVersion describes one version of a line of versions, for choosing
// which versions to keep as checkpoints.
type ChainVersion struct {
	// Apply is the cost of applying this version's delta to the version
	// before it (ignored for the first version).
	Apply float64
	// Seed is the cost of starting a reconstruction from a checkpoint of
	// this version.
	Seed float64
	// Memory is the bytes a checkpoint of this version holds.
	Memory int64
	// Weight is how often the version is asked for. When every weight is
	// zero, every version is asked for equally often.
	Weight float64
}

// Placement is a choice of checkpoints for a chain of versions.
type Placement struct {
	// Checkpoints are indices into the chain, ascending; the first version
	// is always one, since nothing before it can seed the others.
	Checkpoints []int
	// Memory is the bytes the checkpoints hold.
	Memory int64
	// Expected is the expected reconstruction cost of a version drawn by
	// the weights: every version reconstructed from its cheapest checkpoint
	// at or before it.
	Expected float64
}

// Place returns the placement of least expected reconstruction cost whose
// memory is at most budget. It fails when the chain is empty, holds
// negative figures, or when no placement fits the budget (the first
// version's checkpoint alone exceeds it).
func Place(chain []ChainVersion, budget int64) (Placement, error) {
	front, err := Pareto(chain)
	if err != nil {
		return Placement{}, err
	}
	best := -1
	for i, p := range front {
		if p.Memory <= budget {
			best = i // the front is by memory ascending, cost descending
		}
	}
	if best < 0 {
		return Placement{}, fmt.Errorf("placement: Place: the first version's checkpoint takes %d bytes, over the budget of %d", chain[0].Memory, budget)
	}
	return front[best], nil
}

// Pareto returns every placement that no other beats in both memory and
// expected cost, by memory ascending (and so expected cost descending).
//
// It is a dynamic program over the chain. With P(i) the sum of Apply up to
// version i, reconstructing i from a checkpoint q costs
// Seed(q) - P(q) + P(i): so the cheapest checkpoint for i is the one of
// least key Seed(q) - P(q) among those at or before i, the nearest one
// being no better than any other a priori. The program walks the chain
// once; its state is the checkpoint of least key so far, and for each
// state it keeps the Pareto front of (memory, cost so far) of the
// placements that reach it. Every transition adds a version's cost once,
// so the fronts are exact.
func Pareto(chain []ChainVersion) ([]Placement, error) {
	if len(chain) == 0 {
		return nil, errors.New("placement: Pareto of an empty chain")
	}
	uniform := true
	var total float64
	for i, c := range chain {
		if c.Apply < 0 || c.Seed < 0 || c.Memory < 0 || c.Weight < 0 ||
			math.IsNaN(c.Apply) || math.IsNaN(c.Seed) || math.IsNaN(c.Weight) || math.IsInf(c.Apply+c.Seed+c.Weight, 0) {
			return nil, fmt.Errorf("placement: Pareto: version %d has a negative or non-finite figure: %+v", i, c)
		}
		if c.Weight > 0 {
			uniform = false
		}
		total += c.Weight
	}
	weight := func(i int) float64 {
		if uniform {
			return 1
		}
		return chain[i].Weight
	}
	if uniform {
		total = float64(len(chain))
	}
	prefix := make([]float64, len(chain))
	for i := 1; i < len(chain); i++ {
		prefix[i] = prefix[i-1] + chain[i].Apply
	}
	key := func(q int) float64 { return chain[q].Seed - prefix[q] }

	// fronts[b] holds the placements whose best checkpoint so far is b.
	fronts := map[int][]point{0: {{mem: chain[0].Memory, cost: weight(0) * chain[0].Seed, cps: &cons{0, nil}}}}
	for i := 1; i < len(chain); i++ {
		next := map[int][]point{}
		w := weight(i)
		// In order of b, and with a stable prune, so that among placements
		// that tie the same one comes out every time.
		for _, b := range slices.Sorted(maps.Keys(fronts)) {
			for _, p := range fronts[b] {
				// No checkpoint at i.
				next[b] = append(next[b], point{p.mem, p.cost + w*(prefix[i]+key(b)), p.cps})
				// A checkpoint at i, worth it only when it beats b.
				if key(i) < key(b) {
					next[i] = append(next[i], point{p.mem + chain[i].Memory, p.cost + w*chain[i].Seed, &cons{i, p.cps}})
				}
			}
		}
		for b := range next {
			next[b] = prune(next[b])
		}
		fronts = next
	}
	var all []point
	for _, b := range slices.Sorted(maps.Keys(fronts)) {
		all = append(all, fronts[b]...)
	}
	all = prune(all)
	out := make([]Placement, len(all))
	for i, p := range all {
		out[i] = Placement{Checkpoints: p.cps.slice(), Memory: p.mem, Expected: p.cost / total}
	}
	return out, nil
}

// point is a partial placement: its memory, its weighted cost so far, and
// its checkpoints, newest first.
type point struct {
	mem  int64
	cost float64
	cps  *cons
}

type cons struct {
	i    int
	next *cons
}

func (c *cons) slice() []int {
	var out []int
	for ; c != nil; c = c.next {
		out = append(out, c.i)
	}
	slices.Reverse(out)
	return out
}

// prune keeps the points no other beats in both memory and cost, by memory
// ascending.
func prune(ps []point) []point {
	slices.SortStableFunc(ps, func(a, b point) int {
		if a.mem != b.mem {
			if a.mem < b.mem {
				return -1
			}
			return 1
		}
		switch {
		case a.cost < b.cost:
			return -1
		case a.cost > b.cost:
			return 1
		}
		return 0
	})
	out := ps[:0]
	for _, p := range ps {
		if len(out) == 0 || p.cost < out[len(out)-1].cost {
			out = append(out, p)
		}
	}
	return out
}
