// Package blocks is the block allocator of runtime/state: size classes,
// slabs carved into blocks, free lists by owner, zeroing, blocks held back
// by fences while device work may still use them, and Trim
// (docs/INTERNALS.md, "Memory pressure"). It knows nothing of versions,
// heads or the features built on them: those reach their own per-block
// state through the block pointer, or through a block's release hook.
package blocks

import (
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// Block is one fixed-size block of device memory. Its reference count
// counts what holds it (tree leaves, deltas, a cache); owner is the owner
// whose rows it holds (or last held, when free). Its zeroed flag says the
// block reads as zeros and holds nobody's rows: a block fresh from a slab
// or zeroed since its owner gave it back. It is the only mark of a clean
// block: no owner, the empty one included, stands for "zeroed". A Block
// is 64 bytes, one cache line: the flags share a word with the count.
type Block struct {
	ptr   device.Ptr
	slab  *slab // the allocation the block was carved from
	rc    int32 // the reference count, changed by sync/atomic's functions but as Alloc hands the block out and Release drops a sole one
	flags atomic.Uint32
	owner string
	cls   *Class
	hook  atomic.Pointer[Hook]
	uses  *Uses
}

// The flags of a block.
const (
	// zeroedFlag: the block reads as zeros; only free blocks on the clean
	// list.
	zeroedFlag uint32 = 1 << iota
	// untouchedFlag: a zeroed allocation took the block from the clean
	// list, memory no block used, which nothing has read or written since
	// (that its holders say: Touch).
	untouchedFlag
)

// The fill is the flags' upper bits: how many bytes from the block's
// start its holders wrote (SetFill, ClaimFill), or fillUnknown. Every row
// of every version that holds the block lies below its fill, so that a
// holder that claims the bytes from the fill on may append there in place
// while others hold the block too: no version reads them.
const (
	fillShift   = 2
	fillUnknown = ^uint32(0) >> fillShift
	flagBits    = 1<<fillShift - 1
)

// SetFill says the block's first n bytes hold what its holder wrote, and
// no byte after them anything a version reads: its holder alone holds it
// and has just written them. A block is handed out with its fill unknown.
func (b *Block) SetFill(n int) {
	v := fillUnknown
	if n >= 0 && uint64(n) < uint64(fillUnknown) {
		v = uint32(n)
	}
	for {
		f := b.flags.Load()
		nf := f&flagBits | v<<fillShift
		if f == nf || b.flags.CompareAndSwap(f, nf) {
			return
		}
	}
}

// ClaimFill moves the fill from `from` bytes to `to` when it is `from`,
// and reports whether it did: the caller, one of the block's holders, may
// then write bytes [from, to) in place, which no version holds. Of two
// holders that claim the same bytes, one wins; the other copies.
func (b *Block) ClaimFill(from, to int) bool {
	if from < 0 || to < from || uint64(to) >= uint64(fillUnknown) {
		return false
	}
	return b.moveFill(from, to)
}

// moveFill moves the fill from `from` bytes to `to` when it is `from`,
// both known fills, and reports whether it did.
func (b *Block) moveFill(from, to int) bool {
	for {
		f := b.flags.Load()
		if f>>fillShift != uint32(from) {
			return false
		}
		if b.flags.CompareAndSwap(f, f&flagBits|uint32(to)<<fillShift) {
			return true
		}
	}
}

// ReturnFill moves the fill from `from` bytes back down to `to` when it
// is `from`, and reports whether it did. The caller, the holder whose
// rows end at `from` (so that every byte below the fill is its), has
// abandoned the versions that wrote the bytes past `to`, and no one else
// took one of them: no holder reads those bytes, and the next append from
// `to` may claim them (ClaimFill) instead of copying the block.
func (b *Block) ReturnFill(from, to int) bool {
	if to < 0 || from <= to || uint64(from) >= uint64(fillUnknown) {
		return false
	}
	return b.moveFill(from, to)
}

// Uses is the streams whose queued work may use a block (RecordStream and
// the async paths of runtime/state): the fence it is freed behind. One
// Uses is shared by the blocks recorded on the same streams and never
// changed once set, so that a bulk async call records its stream on many
// blocks without a list each; recording another stream on a block gives
// it a new one.
type Uses struct{ Streams []device.Stream }

// Hook is told when the references to a block it is set on drop to one:
// its holder (the prefix cache) may then be the block's only holder.
type Hook func(b *Block)

// Untouched reports whether a zeroed allocation took the block from the
// clean list, and no holder said it touched the block since: memory no
// block used before (on the host backend, pages never touched, which fault
// on their first access). Holders that share a block before writing it, as
// a checkpointed state's first blocks are, keep the mark true until a
// read they report.
func (b *Block) Untouched() bool { return b.flags.Load()&untouchedFlag != 0 }

// Touch says the block's memory was read or written: it is no longer
// untouched.
func (b *Block) Touch() {
	if b.flags.Load()&untouchedFlag != 0 { // a locked instruction: only when it changes
		b.flags.And(^untouchedFlag)
	}
}

// Host returns n bytes of the block's memory from off on as host memory,
// where device memory is the process's (device.HostBytes: the host
// backend), else nil. The range may go on past the block into
// the blocks that follow it (Follows). The caller, a holder of the block,
// copies there with the built-in copy instead of a backend call; the
// memory is the block's while a holder keeps it.
func (b *Block) Host(off, n int) []byte {
	s := b.slab
	if s == nil || s.host == nil {
		return nil
	}
	at := int(b.ptr-s.ptr) + off
	return s.host[at : at+n : at+n]
}

// Ptr returns the block's device address.
func (b *Block) Ptr() device.Ptr { return b.ptr }

// Bytes returns the block's size.
func (b *Block) Bytes() int { return b.cls.bytes }

// Class returns the block's size class.
func (b *Block) Class() *Class { return b.cls }

// Owner returns the owner whose rows the block holds.
func (b *Block) Owner() string { return b.owner }

// GiveTo makes owner the block's owner: its holder, which holds it alone
// and gives it back next, copied owner's rows into it and could not zero
// them, so that the block goes back to owner's free list, where only
// owner takes it unzeroed.
func (b *Block) GiveTo(owner string) { b.owner = owner }

// Zeroed reports whether the block is marked as reading zeros.
func (b *Block) Zeroed() bool { return b.flags.Load()&zeroedFlag != 0 }

// Uses returns the streams recorded on b, or nil. Its holders synchronize
// Uses and SetUses among themselves: the blocks package reads neither.
func (b *Block) Uses() *Uses { return b.uses }

// SetUses sets (nil: clears) the streams recorded on b.
func (b *Block) SetUses(u *Uses) { b.uses = u }

// Refs returns the block's reference count.
func (b *Block) Refs() int32 { return atomic.LoadInt32(&b.rc) }

// Retain takes one more reference to b.
func (b *Block) Retain() { atomic.AddInt32(&b.rc, 1) }

// SetRefs sets the reference count (to one, for a block taken out of the
// allocator's hands; to zero, for one given back unused).
func (b *Block) SetRefs(n int32) { atomic.StoreInt32(&b.rc, n) }

// Release drops one reference to b and reports whether it was the last:
// the block is then the caller's to give back (Allocator.Free). When one
// reference is left, b's hook, if any, is told.
func (b *Block) Release() bool {
	if atomic.LoadInt32(&b.rc) == 1 {
		// The caller holds the only reference: nobody else may take one
		// (a reference is taken only by a holder of one) or drop one, so
		// a plain store, with no locked instruction, drops it.
		b.rc = 0
		return true
	}
	switch atomic.AddInt32(&b.rc, -1) {
	case 0:
		return true
	case 1:
		if h := b.hook.Load(); h != nil {
			(*h)(b)
		}
	}
	return false
}

// SetHook sets (nil: clears) the hook Release tells.
func (b *Block) SetHook(h *Hook) { b.hook.Store(h) }

// HasHook reports whether h is b's hook.
func (b *Block) HasHook(h *Hook) bool { return b.hook.Load() == h }

// Hooked reports whether b has a hook: a holder other than the versions
// (the prefix cache) keeps it.
func (b *Block) Hooked() bool { return b.hook.Load() != nil }

// Follows reports whether b lies right after a in the same allocation, so
// that one copy may span both: neighbouring addresses in two allocations
// are not one range to a backend.
func (b *Block) Follows(a *Block) bool {
	return b.slab == a.slab && b.ptr == a.ptr+device.Ptr(a.cls.bytes)
}

// Bytes sums the sizes of blocks.
func Bytes(list []*Block) int64 {
	var n int64
	for _, b := range list {
		n += int64(b.cls.bytes)
	}
	return n
}
