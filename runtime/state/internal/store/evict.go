package store

import (
	"errors"
	"slices"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// eviction is the pool's eviction: it takes back the memory of the states
// that may give it up (optional ones, the rebuildable part of
// reconstructable ones, cached prefix blocks) when an allocation finds no
// room. It is the pool's reclaimer (makePool), the seam allocation
// reaches it through.
type eviction struct{ p *Pool }

// reclaim takes back memory for an allocation of want blocks of class c
// that found no room, in the order docs/INTERNALS.md gives: pending
// blocks, waited for when they would make the call succeed; optional
// state as the Evictor ranks it; then the rebuildable part of
// reconstructable state. It evicts nothing when all it could evict would
// still leave the call short, and stops evicting as soon as there is room,
// counting as room the blocks eviction freed behind a fence (a recorded
// stream's work may still use them): it then waits for them as for any
// pending block, rather than evict more and fail with them still
// pending. It reports whether there is room now (the caller retries). deviceFull
// says the device itself refused memory, so room under MaxBytes does not
// count. The caller holds no pool lock (it may hold its own handle's,
// which makes that handle busy and so spared).
func (e eviction) reclaim(c *sizeClass, want int, deviceFull bool) bool {
	if e.p.shortfall(c, want, deviceFull) <= 0 {
		return true
	}
	// Blocks released while a recorded stream's work may still use them
	// come back when its events complete: wait for them, when they would
	// make the room, rather than fail or evict.
	if e.p.mem.AwaitRoom(c, want, deviceFull, e.p.pendingWait, e.freeable) {
		return true
	}
	if e.p.shortfall(c, want, deviceFull) <= 0 {
		return true
	}
	// The bytes eviction must free at least: what the call wants beyond
	// every free byte. The shortfall, counted in runs of c's size, may be
	// more, since freed blocks merge with free neighbours into runs; the
	// runs are weighed below.
	need := int64(want)*int64(c.Bytes()) - e.p.mem.Room(deviceFull)
	if e.freeable(need) < need {
		return false // the call fails anyway: evict nothing
	}
	// A victim's blocks that queued work still uses would be pending, not
	// free, once evicted: wait for that work first, and spare the victims
	// whose work outlasts the wait, so that a call that fails anyway has
	// evicted nothing.
	busy := e.awaitVictimWork()
	if len(busy) > 0 {
		if spared := e.busyBytes(busy); e.freeable(need+spared)-spared < need {
			return false
		}
	}
	// Bytes are not room: a block of c needs a free run of its size, and
	// other classes' blocks make one only with free neighbours. When the
	// victims' own blocks of c cover what c lacks, they make the room; else
	// weigh every block eviction would free, merged into runs.
	if own := e.p.mem.OwnShortfall(c, want, deviceFull); own > 0 && !e.victimsCover(c, own, busy) {
		if e.p.mem.ShortfallIf(c, want, deviceFull, e.victimBlocks(busy, false)) > 0 &&
			e.p.mem.ShortfallIf(c, want, deviceFull, e.victimBlocks(busy, true)) > 0 {
			return false
		}
	}
	base := e.p.mem.Stats().Pending
	for _, r := range []Retention{Optional, Reconstructable} {
		for {
			room, progress := e.evictRound(r, c, want, deviceFull, base, busy)
			if room {
				// There is room, or will be once the fenced blocks
				// return: the caller retries even when a concurrent
				// call took it meanwhile, as after any reclaim that
				// made room.
				e.awaitFenced(c, want, deviceFull)
				return true
			}
			if !progress {
				break
			}
		}
	}
	return e.awaitFenced(c, want, deviceFull)
}

// awaitFenced waits, up to PoolOptions.PendingWait, for the blocks
// eviction freed behind a fence, and reports whether there is room.
func (e eviction) awaitFenced(c *sizeClass, want int, deviceFull bool) bool {
	return e.p.mem.AwaitRoom(c, want, deviceFull, e.p.pendingWait, func(int64) int64 { return 0 })
}

// evictRound evicts victims of retention r in the Evictor's order until
// there is room for want blocks of class c, or will be once the blocks
// freed behind a fence since the pool had base bytes pending return.
// progress says it evicted something (a next round may find more: cached
// prefix entries are offered a bounded number at a time).
func (e eviction) evictRound(r Retention, c *sizeClass, want int, deviceFull bool, base int64, busy []device.Stream) (room, progress bool) {
	hs, vs := e.victims(r)
	if len(vs) == 0 {
		return false, false
	}
	e.p.evictor.Rank(vs)
	for _, v := range vs {
		if v.ID == 0 || v.ID > uint64(len(hs)) {
			continue // an Evictor that made up a victim
		}
		if len(busy) > 0 && e.usesAny(hs[v.ID-1], busy) {
			continue // queued work still uses its blocks (awaitVictimWork)
		}
		n, moved, ok := e.evictOne(hs[v.ID-1], len(busy) > 0)
		if !ok {
			continue
		}
		progress = true
		if !moved {
			e.p.evictedBytes.Add(n)
			e.p.evictions.Add(1)
		}
		short := e.p.shortfall(c, want, deviceFull)
		if short > 0 && e.p.mem.Stats().Pending > base {
			// The blocks eviction freed behind a fence make room only
			// where they lie in runs of c's size: wait for them and
			// count again. Those the wait leaves fenced are counted on
			// when they cover the bytes.
			e.awaitFenced(c, want, deviceFull)
			if short = e.p.shortfall(c, want, deviceFull); short > 0 && short <= e.p.mem.Stats().Pending-base {
				return true, true
			}
		}
		if short <= 0 {
			return true, true
		}
	}
	return false, progress
}

// evictOne takes victim x's device blocks: to the host tier where the pool
// has one and it takes x (moved), else dropped. A move that failed drops
// nothing: x stays as it was, and the round goes on to the next victim.
// asListed takes x as it was listed or not at all (listedEvicter), while
// queued work still uses some victims' blocks.
func (e eviction) evictOne(x evictable, asListed bool) (n int64, moved, ok bool) {
	if m, isMover := tierOf(handleOf(x)).(tierMover); isMover && e.p.tier != nil {
		n, moved, err := m.moveOut()
		if moved {
			return n, true, true
		}
		if err != nil {
			return 0, false, false
		}
	}
	if l, isListed := x.(listedEvicter); isListed && asListed {
		n, ok = l.evictListed()
		return n, false, ok
	}
	n, ok = x.evict()
	return n, false, ok
}

// listedEvicter is a victim that may evict another in its place (a cached
// prefix entry: prefixCache.drop). While queued work still uses some
// victims' blocks, eviction takes it only as it was listed, as
// awaitVictimWork weighed it: a substitute may be one whose blocks that
// work uses, which would then stay pending behind it.
type listedEvicter interface {
	evictListed() (int64, bool)
}

// freeable returns the bytes eviction could free now, counted until they
// reach need: the cached prefix blocks no head holds, the blocks only
// optional and rebuildable reconstructable handles hold (a walk of each
// one's tree), and the blocks only registered group states hold, each
// counted once whichever states hold it (groupCache.freeable). Its
// callers ask whether eviction can make a call's room, and the answer
// costs the victims that make it, not every victim.
//
// What each optional handle frees alone misses the blocks they share
// among themselves without making a joint set (one of them holds a block
// alone too: a head that wrote past its snapshot shares the rest with
// it, which its eviction leaves to the snapshot alone, whose eviction
// frees them next round). When the sum falls short it counts the optional
// handles' blocks together instead (heldTogether), before it refuses the
// call.
func (e eviction) freeable(need int64) int64 {
	cached := e.p.cache.cachedBytes()
	if cached >= need {
		return cached
	}
	hs := e.handleVictims()
	var each [2]int64 // by retention
	n := cached
	for i, r := range []Retention{Optional, Reconstructable} {
		for _, h := range hs {
			if f, ok := h.(interface{ freeable() int64 }); ok {
				if _, ok := h.victim(r); ok {
					m := f.freeable()
					each[i] += m
					if n += m; n >= need {
						return n
					}
				}
			}
		}
	}
	if n += e.p.groups.freeable(need - n); n >= need {
		return n
	}
	var together int64
	heldTogether(hs, nil, e.unrecorded(func(b *block) { together += int64(b.Bytes()) }))
	return max(n, n-each[0]+together)
}

// unrecorded passes to f the blocks no stream was recorded on. Counting
// the optional handles' blocks together takes only those: one a stream
// was recorded on, whose holder's partner a round before evicts, may go
// pending behind work the holder's victims were not awaited for
// (awaitVictimWork lists the streams of what each frees alone), and a
// call admitted on it would then fail, having evicted.
func (e eviction) unrecorded(f func(*block)) func(*block) {
	if e.p.rec.n.Load() == 0 {
		return f
	}
	return func(b *block) {
		e.p.rec.mu.Lock()
		recorded := len(streamsOn(b)) > 0
		e.p.rec.mu.Unlock()
		if !recorded {
			f(b)
		}
	}
}

// victims returns the live handles of retention r that may be evicted,
// and their descriptions, whose IDs index the first slice from 1.
func (e eviction) victims(r Retention) ([]evictable, []Victim) {
	live := e.handleVictims()
	if r == Optional {
		live = append(live, e.p.cache.victims(e.p)...)
		live = append(live, e.p.groups.victims(e.p)...)
	}
	var hs []evictable
	var vs []Victim
	for _, x := range live {
		v, ok := x.victim(r)
		if !ok {
			continue
		}
		hs = append(hs, x)
		v.ID = uint64(len(hs))
		vs = append(vs, v)
	}
	return hs, vs
}

// handleVictims returns the live handles that may be evicted, heads and
// snapshots (headVictim, snapVictim), of any retention (their victim
// method says which), groups and cuts as one each, and the optional ones
// that share their blocks among themselves as one each too
// (jointVictims); the caches' entries are not handles.
func (e eviction) handleVictims() []evictable {
	live := e.listedVictims()
	return append(live, jointSets(live)...)
}

// listedVictims is handleVictims without the joint sets: the handles
// the pool lists, a group's and a cut's once.
func (e eviction) listedVictims() []evictable {
	hs := e.p.liveHandles()
	live := make([]evictable, 0, len(hs))
	var groups []*Group
	var cuts []*snapCut
	for _, h := range hs {
		switch h := h.(type) {
		case *Head:
			if g := h.group.Load(); g != nil {
				// A group is one victim: its members go together.
				if !slices.Contains(groups, g) {
					groups = append(groups, g)
					live = append(live, groupVictims{g})
				}
				continue
			}
			live = append(live, headVictim{h})
		case *Snap:
			if c := h.cut; c != nil {
				// A cut is one victim, as a group is: its snapshots
				// go together.
				if !slices.Contains(cuts, c) {
					cuts = append(cuts, c)
					live = append(live, cutVictims{c})
				}
				continue
			}
			live = append(live, snapVictim{h})
		}
	}
	return live
}

// victimStreams returns the streams recorded on the blocks evicting x would
// free, added to out.
func (e eviction) victimStreams(x evictable, out []device.Stream) []device.Stream {
	l, ok := x.(exclusiveLister)
	if !ok || e.p.rec.n.Load() == 0 {
		return out
	}
	var blks []*block
	l.exclusiveBlocks(func(b *block) { blks = append(blks, b) })
	return e.p.rec.streamsOf(blks, out)
}

// heldStreams appends to out the streams recorded on any block x, an
// optional victim that may go with others (jointMember), holds in device
// memory, not only those it frees alone (victimStreams, which it is for
// any other victim): a block it shares is its own alone once the others
// go, in an earlier round of the same reclaim, and its eviction then
// takes it (the tier's copy would wait for the work).
func (e eviction) heldStreams(x evictable, out []device.Stream) []device.Stream {
	j, ok := x.(jointMember)
	if !ok {
		return e.victimStreams(x, out)
	}
	if e.p.rec.n.Load() == 0 {
		return out
	}
	h, ok := j.lockHeld()
	if !ok {
		return out // busy: as victimStreams finds it
	}
	var blks []*block
	for _, r := range h.roots {
		blks, _ = rootBlocks(r, blks)
	}
	h.unlock()
	return e.p.rec.streamsOf(blks, out)
}

// usesAny reports whether a block evicting x would free is recorded on
// one of streams.
func (e eviction) usesAny(x evictable, streams []device.Stream) bool {
	return usesStream(e.victimStreams(x, nil), streams)
}

// busyBytes returns the bytes the victims that busy streams use would
// free: eviction spares them.
func (e eviction) busyBytes(busy []device.Stream) int64 {
	var n int64
	for _, r := range []Retention{Optional, Reconstructable} {
		hs, vs := e.victims(r)
		for i, h := range hs {
			if !e.usesAny(h, busy) {
				continue
			}
			if f, ok := h.(interface{ freeable() int64 }); ok {
				n += f.freeable()
			} else {
				n += vs[i].Bytes
			}
		}
	}
	return n
}

// awaitVictimWork waits, up to PoolOptions.PendingWait, for the work
// queued so far on the streams recorded on the blocks eviction could free,
// and returns the streams whose work has not completed by then: their
// victims' blocks would only go pending (docs/INTERNALS.md, memory
// pressure). A closed or failed stream's work is over.
func (e eviction) awaitVictimWork() []device.Stream {
	if e.p.rec.n.Load() == 0 {
		return nil
	}
	var sts []device.Stream
	for _, r := range []Retention{Optional, Reconstructable} {
		hs, _ := e.victims(r)
		for _, h := range hs {
			if r == Optional {
				sts = e.heldStreams(h, sts)
			} else {
				sts = e.victimStreams(h, sts)
			}
		}
	}
	if len(sts) == 0 {
		return nil
	}
	sb := e.p.b.(device.Streams) // a stream was recorded: recordStream checked it
	type mark struct {
		st device.Stream
		ev device.Event
	}
	var busy []device.Stream
	var marks []mark
	for _, st := range sts {
		ev, err := sb.Record(st)
		switch {
		case err == nil:
			marks = append(marks, mark{st, ev})
		case !errors.Is(err, device.ErrStreamClosed):
			busy = append(busy, st) // no event to wait for: spare its victims
		}
	}
	defer func() {
		for _, m := range marks {
			m.ev.Close()
		}
	}()
	deadline := time.Now().Add(max(e.p.pendingWait, 0))
	for pause := time.Microsecond; ; pause = min(2*pause, time.Millisecond) {
		left := marks[:0]
		for _, m := range marks {
			if done, err := m.ev.Done(); !done && err == nil {
				left = append(left, m)
			} else {
				m.ev.Close()
			}
		}
		marks = left
		if len(marks) == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(pause)
	}
	for _, m := range marks {
		busy = append(busy, m.st)
	}
	return busy
}

// victimsCover reports whether the blocks of class c that evicting the
// victims would free (but those the busy streams' work uses) come to own
// bytes: it walks the victims, in no particular order, until they do, so
// that the common case, victims of the class the allocation wants, looks
// at one or two.
func (e eviction) victimsCover(c *sizeClass, own int64, busy []device.Stream) bool {
	var got int64
	for _, r := range []Retention{Optional, Reconstructable} {
		hs, _ := e.victims(r)
		for _, h := range hs {
			l, ok := h.(exclusiveLister)
			if !ok || (len(busy) > 0 && e.usesAny(h, busy)) {
				continue
			}
			l.exclusiveBlocks(func(b *block) {
				if b.Class() == c {
					got += int64(b.Bytes())
				}
			})
			if got >= own {
				return true
			}
		}
	}
	return false
}

// victimBlocks returns the blocks evicting every victim would free, but
// those of the victims the busy streams' work uses: the blocks each
// optional and reconstructable handle holds alone, and those of every
// cached prefix entry no head holds. Together, it lists the blocks the
// optional handles hold among themselves alone instead (heldTogether):
// more where they share without making a joint set, at the cost of a
// walk of every block of theirs, which a caller pays only when the first
// list leaves it short.
func (e eviction) victimBlocks(busy []device.Stream, together bool) []*block {
	var out []*block
	for _, r := range []Retention{Optional, Reconstructable} {
		hs, _ := e.victims(r)
		uses := func(h evictable) bool { return len(busy) > 0 && e.usesAny(h, busy) }
		joint := together && r == Optional
		if joint {
			// The optional handles' blocks together: a set's are theirs.
			heldTogether(hs, uses, e.unrecorded(func(b *block) { out = append(out, b) }))
		}
		for _, h := range hs {
			switch h.(type) {
			case *cachedEntry, groupVictim:
				continue // every free entry and state is listed below
			case jointVictims, jointMember:
				if joint {
					continue // listed together above
				}
			}
			if l, ok := h.(exclusiveLister); ok && !uses(h) {
				l.exclusiveBlocks(func(b *block) { out = append(out, b) })
			}
		}
	}
	n := len(out)
	e.p.cache.freeBlocks(func(b *block) { out = append(out, b) })
	e.p.groups.freeBlocks(func(b *block) { out = append(out, b) })
	if len(busy) > 0 && e.p.rec.n.Load() > 0 {
		e.p.rec.mu.Lock()
		keep := out[:n]
		for _, b := range out[n:] {
			if !usesStream(streamsOn(b), busy) {
				keep = append(keep, b)
			}
		}
		e.p.rec.mu.Unlock()
		out = keep
	}
	return out
}

// usesStream reports whether list holds one of busy's streams.
func usesStream(list, busy []device.Stream) bool {
	for _, st := range list {
		if hasStream(busy, st) {
			return true
		}
	}
	return false
}
