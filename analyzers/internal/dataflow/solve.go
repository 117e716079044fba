// Package dataflow is the forward dataflow solver shared by statevet's
// stcleanup, stalias and streleased analyzers, with the syntactic helpers
// their transfer functions have in common: the conditions that decide a
// block's two successors and what they prove, and the variables operands
// denote.
//
// The solver works on the syntactic control-flow graphs of package ctrlflow
// (golang.org/x/tools/go/cfg) rather than on SSA. The CFGs are built anyway
// by the cheapest analyzers a vet run carries (lostcancel needs them), they
// already cut paths at calls that never return (panic, os.Exit, log.Fatal,
// t.Fatal, through ctrlflow's facts), and their nodes are the source's own
// statements, so findings, related positions and suggested fixes point at
// what the user wrote. SSA would give def-use chains and phi nodes for free
// but would cost a whole-package construction in every active package; the
// analyzers track their facts per variable with joins instead, which
// handles values merged at if/else joins the way a phi does.
package dataflow

import "golang.org/x/tools/go/cfg"

// A Problem is a forward dataflow problem over a CFG whose states are values
// of type S. States must be treated as immutable: Transfer and Edge return a
// new state rather than modifying their argument.
type Problem[S any] struct {
	Entry    S                                     // state on entry to the function
	Bottom   S                                     // state of a block not yet reached
	Join     func(a, b S) S                        // least upper bound
	Equal    func(a, b S) bool                     // whether two states are the same
	Transfer func(b *cfg.Block, in S) S            // effect of the block's nodes
	Edge     func(b *cfg.Block, succ int, out S) S // refinement along b.Succs[succ]; nil: none
}

// maxVisits bounds the work per block; a problem that has not converged by
// then is abandoned (its function reports nothing).
const maxVisits = 64

// Solve computes the state on entry to every live block of g. It reports false
// when the iteration did not converge within its budget; callers then report
// nothing for the function, which keeps the analyzers quiet rather than wrong.
func Solve[S any](g *cfg.CFG, p *Problem[S]) (in []S, ok bool) {
	n := len(g.Blocks)
	in = make([]S, n)
	reached := make([]bool, n)
	for i := range in {
		in[i] = p.Bottom
	}
	if n == 0 {
		return in, true
	}
	in[0] = p.Entry
	reached[0] = true
	visits := make([]int, n)
	queued := make([]bool, n)
	work := []*cfg.Block{g.Blocks[0]}
	queued[0] = true
	for len(work) > 0 {
		b := work[len(work)-1]
		work = work[:len(work)-1]
		queued[b.Index] = false
		visits[b.Index]++
		if visits[b.Index] > maxVisits {
			return in, false
		}
		out := p.Transfer(b, in[b.Index])
		for i, succ := range b.Succs {
			s := out
			if p.Edge != nil {
				s = p.Edge(b, i, out)
			}
			j := succ.Index
			var next S
			if reached[j] {
				next = p.Join(in[j], s)
				if p.Equal(next, in[j]) {
					continue
				}
			} else {
				next = s
				reached[j] = true
			}
			in[j] = next
			if !queued[j] {
				queued[j] = true
				work = append(work, succ)
			}
		}
	}
	return in, true
}
