package store

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// Fences: the streams whose work may use each block, and the waits on
// them a block freed while that work may run goes behind (stream.go).

// recorded is the streams whose work may use each block (RecordStream,
// the async paths): the block's fence when it is freed. Each block
// carries its own (blocks.Uses), as a cache line it is written through
// anyway, where a map keyed by block cost a miss per block on both
// sides; mu guards every block's Uses.
type recorded struct {
	mu sync.Mutex
	n  atomic.Int64 // the blocks with streams recorded, read without mu
	// last is the Uses of the last stream recorded alone, which the
	// blocks recorded on it alone share.
	last *blocks.Uses
}

// addLocked records st on b and reports whether b had no stream recorded
// before: the caller adds those to rec.n. rec.mu is held.
func (rec *recorded) addLocked(b *block, st device.Stream) bool {
	u := b.Uses()
	switch {
	case u == nil:
		if rec.last == nil || rec.last.Streams[0] != st {
			rec.last = &blocks.Uses{Streams: []device.Stream{st}}
		}
		b.SetUses(rec.last)
		return true
	case !hasStream(u.Streams, st):
		b.SetUses(&blocks.Uses{Streams: append(slices.Clip(u.Streams), st)})
	}
	return false
}

// addAll records st on blocks bs: work queued on st uses them.
func (rec *recorded) addAll(bs []*block, st device.Stream) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var added int64
	for _, b := range bs {
		if rec.addLocked(b, st) {
			added++
		}
	}
	rec.n.Add(added)
}

// addWritten marks the blocks an AppendAsync call's short path queued
// copies to as used by st: the tails, where not nil, and news, the new
// blocks. It is addRows for those rows, with the blocks at hand rather
// than looked up in the tree, while their records are in the cache.
func (rec *recorded) addWritten(tails, news []*block, st device.Stream) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var added int64
	for _, b := range tails {
		if b != nil && rec.addLocked(b, st) {
			added++
		}
	}
	for _, b := range news {
		if rec.addLocked(b, st) {
			added++
		}
	}
	rec.n.Add(added)
}

// streamsOn returns the streams recorded on b. rec.mu is held.
func streamsOn(b *block) []device.Stream {
	if u := b.Uses(); u != nil {
		return u.Streams
	}
	return nil
}

// fenceRecorded takes the blocks of list that a stream was recorded on out
// of it and frees them behind a fence of events on those streams; it
// returns the others, for the caller to free at once, in list's own
// memory.
func (rec *recorded) fenceRecorded(be device.Backend, mem *blocks.Allocator, list []*block) []*block {
	if rec.n.Load() == 0 {
		return list
	}
	var fenced []*block
	var streams []device.Stream
	var last *blocks.Uses
	rec.mu.Lock()
	rest := list[:0] // in place: it never passes the block being read
	for i, b := range list {
		u := b.Uses()
		if u == nil {
			rest = append(rest, b)
			continue
		}
		b.SetUses(nil)
		if fenced == nil {
			// Sized once: grown by doubling, it was half of what a
			// serving loop that renews its states allocated.
			fenced = make([]*block, 0, len(list)-i)
		}
		if u != last { // blocks recorded together share one
			last = u
			for _, st := range u.Streams {
				if !hasStream(streams, st) {
					streams = append(streams, st)
				}
			}
		}
		fenced = append(fenced, b)
	}
	rec.n.Add(-int64(len(fenced)))
	rec.mu.Unlock()
	if len(fenced) > 0 {
		mem.FreeAfter(fenced, fence(be, streams))
	}
	return rest
}

// forget forgets every recorded block, for Close, which frees them all.
func (rec *recorded) forget() {
	rec.mu.Lock()
	rec.n.Store(0)
	rec.last = nil
	rec.mu.Unlock()
}

// fence records an event on each of streams and returns a function that
// waits for them all. A stream closed since it was recorded has finished
// its work (Close waits for it) and needs no event. Where the backend
// fails to record one, the fence waits for that stream's work (its Sync),
// and only when that fails too for the whole device: a device-wide wait
// also waits for every other stream, and one held by a long kernel kept
// the blocks pending for as long, so that the allocation that evicted
// them failed anyway.
func fence(b device.Backend, streams []device.Stream) func() {
	sb := b.(device.Streams) // recordStream checked it
	var events []device.Event
	var unmarked []device.Stream
	for _, st := range streams {
		ev, err := sb.Record(st)
		switch {
		case err == nil:
			events = append(events, ev)
		case errors.Is(err, device.ErrStreamClosed):
		default:
			unmarked = append(unmarked, st)
		}
	}
	return func() {
		for _, ev := range events {
			ev.Wait() // a failed stream's work is over too: its blocks go back
			ev.Close()
		}
		for _, st := range unmarked {
			if err := st.Sync(); err != nil && !errors.Is(err, device.ErrStreamClosed) {
				b.Sync()
				return
			}
		}
	}
}

// streamsOf appends to out, each once, the streams recorded on blks.
func (rec *recorded) streamsOf(blks []*block, out []device.Stream) []device.Stream {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, b := range blks {
		for _, st := range streamsOn(b) {
			if !hasStream(out, st) {
				out = append(out, st)
			}
		}
	}
	return out
}

func hasStream(list []device.Stream, st device.Stream) bool {
	for _, s := range list {
		if s == st {
			return true
		}
	}
	return false
}

// sharedEvent is an event with more than one holder, each of which closes
// it once: an AppendAsync's is the head's, which waits for its rows to
// land, and the pool's staging's, which polls it to free the staging
// buffer; the event after a kernel (kernelRows) is a head's and its
// branches'. The last Close frees it, and keeps the wrapper for the next
// (sharedEvents): nothing holds it then.
type sharedEvent struct {
	device.Event
	refs atomic.Int32
}

// sharedEvents keeps the wrappers whose last holder closed them: an
// AppendAsync makes one a call.
var sharedEvents sync.Pool

// newSharedEvent returns ev wrapped for its holders.
func newSharedEvent(ev device.Event, holders int32) *sharedEvent {
	e, _ := sharedEvents.Get().(*sharedEvent)
	if e == nil {
		e = new(sharedEvent)
	}
	e.Event = ev
	e.refs.Store(holders)
	return e
}

// hold adds a holder, which closes it once too.
func (e *sharedEvent) hold() { e.refs.Add(1) }

func (e *sharedEvent) Close() error {
	if e.refs.Add(-1) != 0 {
		return nil
	}
	err := e.Event.Close()
	e.Event = nil
	sharedEvents.Put(e)
	return err
}
