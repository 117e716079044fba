package state

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// Stream-ordered lifetimes. Work queued on a device stream may use a
// state's blocks long after the call that queued it returned. RecordStream
// marks every block a handle holds as used by a stream; when such a block's
// last reference goes (release, rollback, copy-on-write), the pool records
// an event on each stream that used it and keeps the block pending (not
// free, not zeroed, not reusable) until those events complete. A goroutine
// per batch of released blocks waits for the events and then hands the
// blocks to the free lists; the releasing call never waits.

// recordStream marks the blocks of r as used by st.
func (p *Pool) recordStream(r *root, st device.Stream) error {
	if st == nil {
		return errors.New("RecordStream of a nil stream")
	}
	sb, ok := p.b.(device.Streams)
	if !ok {
		return fmt.Errorf("RecordStream: the %s backend has no streams: %w", p.b.Name(), errors.ErrUnsupported)
	}
	// A stream of another backend (or a closed one) would never order
	// this backend's frees: the event the check records fails on it.
	if err := checkStream(sb, st); err != nil {
		return fmt.Errorf("RecordStream: %w", err)
	}
	p.rec.mu.Lock()
	defer p.rec.mu.Unlock()
	for ci := range r.cols {
		t := &r.cols[ci]
		for i := t.lo; i < t.n; i++ {
			if b := t.held(i); b != nil {
				p.rec.addLocked(b, st)
			}
		}
	}
	return nil
}

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
func (p *Pool) fenceRecorded(list []*block) []*block {
	if p.rec.n.Load() == 0 {
		return list
	}
	var fenced []*block
	var streams []device.Stream
	p.rec.mu.Lock()
	rest := list[:0:0]
	for _, b := range list {
		sts, ok := p.rec.of[b]
		if !ok {
			rest = append(rest, b)
			continue
		}
		delete(p.rec.of, b)
		p.rec.n.Add(-1)
		for _, st := range sts {
			if !hasStream(streams, st) {
				streams = append(streams, st)
			}
		}
		fenced = append(fenced, b)
	}
	p.rec.mu.Unlock()
	if len(fenced) > 0 {
		p.mem.FreeAfter(fenced, p.fence(streams))
	}
	return rest
}

// forgetRecorded forgets every recorded block, for Close.
func (p *Pool) forgetRecorded() {
	p.rec.mu.Lock()
	p.rec.of = nil
	p.rec.n.Store(0)
	p.rec.mu.Unlock()
}

func hasStream(list []device.Stream, st device.Stream) bool {
	for _, s := range list {
		if s == st {
			return true
		}
	}
	return false
}

// fence records an event on each of streams and returns a function that
// waits for them all. A stream closed since it was recorded has finished
// its work (Close waits for it) and needs no event. When the backend fails
// to record one, the fallback is to wait for the whole device.
func (p *Pool) fence(streams []device.Stream) func() {
	sb := p.b.(device.Streams) // recordStream checked it
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
			p.b.Sync()
		}
	}
}

// WaitPending waits until the blocks pending now (released while a
// recorded stream's work could still use them) are free, and returns how
// many bytes were pending when it was called. Close waits the same way;
// releases never do.
func (p *Pool) WaitPending() int64 {
	if p == nil {
		return 0
	}
	return p.mem.WaitPending()
}

// RecordStream says that work queued on st uses the rows h holds now: the
// blocks that hold them are not reused, zeroed for another owner or freed
// until that work has completed, whatever happens to h meanwhile. It needs
// a backend with device.Streams; it never waits.
func (h *Head) RecordStream(st device.Stream) error {
	// No registration of kernel-written blocks at the start of this call:
	// the kernel st runs may be the one writing them (docs/INTERNALS.md).
	if err := h.open("RecordStream", true, false); err != nil {
		return err
	}
	defer h.end()
	if err := h.pool.recordStream(h.r, st); err != nil {
		return h.errorf("RecordStream", "%w", err)
	}
	h.streams.add(st)
	if h.share != nil && h.share.tab != nil && !h.share.broken {
		h.markWritten(h.streams.get()) // rows a kernel queued before this call writes
	}
	return nil
}

// RecordStream says that work queued on st reads the snapshot's rows: its
// blocks are not reused, zeroed for another owner or freed until that work
// has completed, even when the snapshot is released first. It needs a
// backend with device.Streams; it never waits.
func (s *Snap) RecordStream(st device.Stream) error {
	unlock, err := s.rlock("RecordStream")
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.pool.recordStream(s.r, st); err != nil {
		return s.errorf("RecordStream", "%w", err)
	}
	s.streams.add(st)
	return nil
}

// streamSet is the streams recorded on one handle, for the frees of its
// block tables.
type streamSet struct {
	mu   sync.Mutex
	list []device.Stream
}

// empty reports whether no stream was recorded.
func (ss *streamSet) empty() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.list) == 0
}

func (ss *streamSet) add(st device.Stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !hasStream(ss.list, st) {
		ss.list = append(ss.list, st)
	}
}

func (ss *streamSet) get() []device.Stream {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return append([]device.Stream(nil), ss.list...)
}

func (h *Head) recordedStreams() []device.Stream { return h.streams.get() }
func (s *Snap) recordedStreams() []device.Stream { return s.streams.get() }
