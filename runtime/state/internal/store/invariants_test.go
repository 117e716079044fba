package store

import (
	"fmt"

	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// slabBlocks is how many blocks a slab holds, the cap permitting.
const slabBlocks = blocks.SlabBlocks

// checkInvariants walks every live handle of p and checks the structure:
// every reference count equals the references actually held, every tree
// holds exactly the blocks its rows need, the blocks in use are the pool's
// count, and no block is both free and in use. It returns the first
// violation.
func checkInvariants(p *Pool) error {
	p.gate.shut()
	defer p.gate.open()
	// The caches' references, taken before the pool's lock (their locks
	// come first): the prefix cache's blocks, the group cache's roots.
	rootRefs := map[*root]int{}
	var cacheBlocks []*block
	p.cache.mu.Lock()
	for b := range p.cache.refs {
		cacheBlocks = append(cacheBlocks, b)
	}
	p.cache.mu.Unlock()
	p.groups.mu.Lock()
	for e := p.groups.states.front; e != nil; e = e.next {
		for _, r := range e.roots {
			rootRefs[r]++
		}
	}
	p.groups.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil
	}
	var histBlocks []*block
	var shapes = map[*root]shape{}
	var tierBytes int64 // the bytes of the live handles' images in the host tier
	for _, h := range p.liveHandles() {
		switch x := h.(type) {
		case *Head:
			x.mu.Lock()
			if x.tier != nil {
				if x.r != nil || !x.evicted {
					x.mu.Unlock()
					return fmt.Errorf("%s: in the host tier and in device memory at once", x.describe())
				}
				tierBytes += x.tier.bytes
			}
			if x.r != nil {
				rootRefs[x.r]++
				shapes[x.r] = x.shape
			}
			if g := x.group.Load(); g != nil && x.gshare != nil {
				for _, pd := range x.gshare.pending {
					for i, r := range pd.roots {
						rootRefs[r]++
						shapes[r] = g.heads[i].shape
					}
				}
			}
			if x.hist != nil {
				if err := checkHistoryShape(x.hist); err != nil {
					x.mu.Unlock()
					return err
				}
				for _, r := range x.hist.roots() {
					rootRefs[r]++
					shapes[r] = x.shape
				}
				histBlocks = append(histBlocks, x.hist.deltaBlocks()...)
			}
			if err := x.checkLogicalLocked(); err != nil {
				x.mu.Unlock()
				return err
			}
			x.mu.Unlock()
		case *Snap:
			if x.tier != nil {
				if x.r != nil || !x.evicted {
					return fmt.Errorf("%s: in the host tier and in device memory at once", x.describe())
				}
				tierBytes += x.tier.bytes
			}
			if x.r != nil {
				rootRefs[x.r]++
				shapes[x.r] = x.shape
			}
		}
	}
	nodeRefs := map[*node]int{}
	blockRefs := map[*block]int{}
	var walk func(n *node, seen map[*node]bool)
	seen := map[*node]bool{}
	walk = func(n *node, seen map[*node]bool) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, k := range n.kids {
			if k != nil {
				nodeRefs[k]++
				walk(k, seen)
			}
		}
		for _, b := range n.blks {
			if b != nil {
				blockRefs[b]++
			}
		}
	}
	for r, refs := range rootRefs {
		if got := int(r.rc.Load()); got != refs {
			return fmt.Errorf("root with %d rows has count %d, %d references", r.rows, got, refs)
		}
		sh, known := shapes[r] // a registered group state's root has none at hand
		for c, t := range r.cols {
			if !known {
				if t.root != nil {
					nodeRefs[t.root]++
					walk(t.root, seen)
				}
				continue
			}
			per := sh.perBlock[c]
			if want := (r.rows + per - 1) / per; t.n != want {
				return fmt.Errorf("column %d of a root with %d rows holds %d blocks, want %d", c, r.rows, t.n, want)
			}
			if t.root == nil {
				continue
			}
			if t.n > capacity(t.height) {
				return fmt.Errorf("column %d holds %d blocks in a tree of height %d", c, t.n, t.height)
			}
			// A window drops the blocks wholly below its floor, and
			// only those.
			if lo := sh.floor(r.rows) / per; t.lo != lo {
				return fmt.Errorf("column %d of a root with %d rows dropped blocks below %d, want %d", c, r.rows, t.lo, lo)
			}
			for i := 0; i < t.lo; i++ {
				if present(t, i) {
					return fmt.Errorf("column %d still holds expired block %d (floor block %d)", c, i, t.lo)
				}
			}
			for i := t.lo; i < t.n; i++ {
				if t.get(i) == nil {
					return fmt.Errorf("column %d misses block %d of %d", c, i, t.n)
				}
			}
			nodeRefs[t.root]++
			walk(t.root, seen)
		}
	}
	for _, b := range cacheBlocks {
		blockRefs[b]++
	}
	deltaBlocks := map[*block]bool{}
	for _, b := range histBlocks {
		blockRefs[b]++
		deltaBlocks[b] = true
	}
	var got int64
	for b := range deltaBlocks {
		got += int64(b.Bytes())
	}
	if got != p.gate.history() {
		return fmt.Errorf("histories hold %d delta bytes, the pool counts %d", got, p.gate.history())
	}
	for n, refs := range nodeRefs {
		if got := int(n.rc.Load()); got != refs {
			return fmt.Errorf("node has count %d, %d references", got, refs)
		}
	}
	for b, refs := range blockRefs {
		if got := int(b.Refs()); got != refs {
			return fmt.Errorf("block %#x has count %d, %d references", b.Ptr(), got, refs)
		}
	}
	if err := p.mem.Check(blockRefs); err != nil {
		return err
	}
	for _, x := range p.tierPx.list() {
		tierBytes += x.img.bytes
	}
	if p.tier != nil {
		if err := p.tier.check(tierBytes); err != nil {
			return err
		}
	} else if tierBytes != 0 {
		return fmt.Errorf("handles hold %d bytes in the host tier of a pool without one", tierBytes)
	}
	var logical int64
	for _, h := range p.liveHandles() {
		logical += h.logicalBytes()
	}
	if logical != p.gate.logical() {
		return fmt.Errorf("live handles hold %d logical bytes, the pool counts %d", logical, p.gate.logical())
	}
	return nil
}

// present reports whether block i of t is in the tree, walking only
// nodes that exist.
func present(t tree, i int) bool {
	n := t.root
	for h := t.height; h > 1; h-- {
		if n == nil {
			return false
		}
		n = n.kids[(i>>(fanBits*(h-1)))&(fan-1)]
	}
	return n != nil && n.blks[i&(fan-1)] != nil
}

// checkStreamMarks checks that every live head's stream marks are honest
// (streamMark): each block a mark says carries its stream does. A mark
// left too high after a change of version lets a later RecordStream skip
// a block that work on the stream reads, which could then be freed and
// reused under that work.
func checkStreamMarks(p *Pool) error {
	if err := p.enter(); err != nil {
		return nil // closed: nothing is live
	}
	defer p.leave()
	p.mu.Lock()
	var heads []*Head
	for _, x := range p.liveHandles() {
		if h, ok := x.(*Head); ok {
			heads = append(heads, h)
		}
	}
	p.mu.Unlock()
	for _, h := range heads {
		if err := h.checkMarks(); err != nil {
			return err
		}
	}
	return nil
}

func (h *Head) checkMarks() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.r == nil {
		return nil
	}
	h.pool.rec.mu.Lock()
	defer h.pool.rec.mu.Unlock()
	for _, m := range h.async.marks {
		for c := range h.r.cols {
			t := &h.r.cols[c]
			for i := t.lo; i < min(m.upTo[c], t.n); i++ {
				if b := t.held(i); b != nil && !hasStream(streamsOn(b), m.st) {
					return fmt.Errorf("%s: column %d block %d is below the stream's mark (%d) and does not carry it", h.describe(), c, i, m.upTo[c])
				}
			}
		}
	}
	return nil
}

// checkHistoryShape checks what trimming keeps of a history: its oldest
// entry is a checkpoint with no delta, and it holds at most Keep
// checkpoints (a head trims only when it takes one).
func checkHistoryShape(x *history) error {
	if len(x.entries) == 0 {
		return fmt.Errorf("a history with no entries")
	}
	if e := x.entries[0]; e.cp == nil || e.d != nil {
		return fmt.Errorf("the oldest entry of a history, version %d: checkpoint %v, delta %v", e.pos.v, e.cp != nil, e.d != nil)
	}
	if n := len(x.roots()); x.policy.Keep > 0 && n > x.policy.Keep {
		return fmt.Errorf("a history holds %d checkpoints, Keep is %d", n, x.policy.Keep)
	}
	return nil
}

// checkLogicalLocked checks the head's share of the pool's logical bytes
// against its rows: its root's readable rows, or, while its root is away
// (evicted, lost, in the host tier), some bytes while Len answers rows
// and none once it is evicted for good. h.mu is held.
func (h *Head) checkLogicalLocked() error {
	switch rows := h.rowsLocked(); {
	case h.r != nil:
		if want := h.logicalOf(h.r); h.logical != want {
			return fmt.Errorf("%s: counts %d logical bytes, its rows read as %d", h.describe(), h.logical, want)
		}
	case h.evictedForGood() && h.logical != 0:
		return fmt.Errorf("%s: evicted for good, yet counts %d logical bytes", h.describe(), h.logical)
	case !h.evictedForGood() && (rows > 0) != (h.logical > 0):
		return fmt.Errorf("%s: away with %d rows and %d logical bytes", h.describe(), rows, h.logical)
	}
	return nil
}
