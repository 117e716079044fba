package state

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/blocks"
)

// Fences: the streams whose work may use each block, and the waits on
// them a block freed while that work may run goes behind (stream.go).

// recorded is the streams whose work may use each block (RecordStream,
// the async paths): the block's fence when it is freed. The blocks know
// nothing of it; free looks each block up while any is recorded.
type recorded struct {
	mu sync.Mutex
	of map[*block][]device.Stream
	n  atomic.Int64 // len(of), read without mu
	// last is the list of the last stream recorded alone, which the
	// blocks recorded on it alone share (full, so that recording a second
	// stream on one copies it): a bulk async call records one stream on
	// many blocks without a list each.
	last []device.Stream
}

// addLocked records st on b. rec.mu is held.
func (rec *recorded) addLocked(b *block, st device.Stream) {
	list := rec.of[b]
	if hasStream(list, st) {
		return
	}
	if rec.of == nil {
		rec.of = make(map[*block][]device.Stream)
	}
	if list == nil {
		rec.n.Add(1)
		if len(rec.last) == 0 || rec.last[0] != st {
			rec.last = []device.Stream{st}
		}
		rec.of[b] = rec.last
		return
	}
	rec.of[b] = append(list, st)
}

// fenceRecorded takes the blocks of list that a stream was recorded on out
// of it and frees them behind a fence of events on those streams; it
// returns the others, for the caller to free at once.
func (rec *recorded) fenceRecorded(be device.Backend, mem *blocks.Allocator, list []*block) []*block {
	if rec.n.Load() == 0 {
		return list
	}
	var fenced []*block
	var streams []device.Stream
	rec.mu.Lock()
	rest := list[:0:0]
	for _, b := range list {
		sts, ok := rec.of[b]
		if !ok {
			rest = append(rest, b)
			continue
		}
		delete(rec.of, b)
		rec.n.Add(-1)
		for _, st := range sts {
			if !hasStream(streams, st) {
				streams = append(streams, st)
			}
		}
		fenced = append(fenced, b)
	}
	rec.mu.Unlock()
	if len(fenced) > 0 {
		mem.FreeAfter(fenced, fence(be, streams))
	}
	return rest
}

// forgetRecorded forgets every recorded block, for Close.
func (rec *recorded) forget() {
	rec.mu.Lock()
	rec.of = nil
	rec.n.Store(0)
	rec.mu.Unlock()
}

// fence records an event on each of streams and returns a function that
// waits for them all. A stream closed since it was recorded has finished
// its work (Close waits for it) and needs no event. When the backend fails
// to record one, the fallback is to wait for the whole device.
func fence(b device.Backend, streams []device.Stream) func() {
	sb := b.(device.Streams) // recordStream checked it
	var events []device.Event
	var sync bool
	for _, st := range streams {
		ev, err := sb.Record(st)
		switch {
		case err == nil:
			events = append(events, ev)
		case errors.Is(err, device.ErrStreamClosed):
		default:
			sync = true
		}
	}
	return func() {
		for _, ev := range events {
			ev.Wait() // a failed stream's work is over too: its blocks go back
			ev.Close()
		}
		if sync {
			b.Sync()
		}
	}
}

func hasStream(list []device.Stream, st device.Stream) bool {
	for _, s := range list {
		if s == st {
			return true
		}
	}
	return false
}
