package blocks

import "time"

// Fences. A block freed while device work queued on a stream may still
// use it is pending: neither in use nor free, not zeroed, not reusable,
// until the work's fence (a wait on events recorded on its streams)
// returns. A goroutine per batch waits and then hands the blocks to the
// free lists; the freeing call never waits. Other deferred work (freeing a
// table, giving back a staging buffer) joins the same batches, so that
// WaitPending and Close wait for it too.

// fences is the allocator's pending work; guarded by its mu.
type fences struct {
	pendingBytes int64                      // bytes of blocks freed behind a fence
	batches      map[chan struct{}]struct{} // closed when their work is done
	// changed is closed, and replaced, whenever a batch completes.
	changed chan struct{}
}

// addBatchLocked registers a batch of pending work and returns the
// channel to close when it is done. The allocator's mu is held.
func (f *fences) addBatchLocked() chan struct{} {
	done := make(chan struct{})
	if f.batches == nil {
		f.batches = map[chan struct{}]struct{}{}
	}
	f.batches[done] = struct{}{}
	return done
}

// endBatchLocked forgets a completed batch and wakes its waiters. The
// allocator's mu is held.
func (f *fences) endBatchLocked(done chan struct{}) {
	delete(f.batches, done)
	close(done)
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// FreeAfter frees blocks whose reference count reached zero once fence
// returns: until then they are pending. It never waits itself.
func (a *Allocator) FreeAfter(list []*Block, fence func()) {
	if len(list) == 0 {
		return
	}
	// The class and owner of each stretch of blocks, read here: the
	// goroutine that frees them after the fence then reads no block. Its
	// reads left every block's line shared with another core, and the
	// allocation that next handed the block out waited for that line
	// before it could write the count.
	var runs []freedRun
	var pending int64
	for _, b := range list {
		if k := len(runs) - 1; k >= 0 && runs[k].cls == b.cls && runs[k].owner == b.owner {
			runs[k].n++
		} else {
			runs = append(runs, freedRun{cls: b.cls, owner: b.owner, n: 1})
		}
		pending += int64(b.cls.bytes)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.pendingBytes += pending
	for _, r := range runs {
		r.cls.inUse -= int64(r.n)
	}
	done := a.addBatchLocked()
	a.mu.Unlock()
	go func() {
		fence()
		a.mu.Lock()
		defer a.mu.Unlock()
		// In the order Free would have pushed them: the last first.
		end := len(list)
		for k := len(runs) - 1; k >= 0; k-- {
			r := runs[k]
			if !a.closed {
				r.cls.putDirtyRunLocked(r.owner, list[end-r.n:end])
				r.cls.nfree += int64(r.n)
			}
			end -= r.n
		}
		a.pendingBytes -= pending
		a.endBatchLocked(done)
	}()
}

// freedRun is a stretch of blocks of one class and owner in a list
// FreeAfter frees.
type freedRun struct {
	cls   *Class
	owner string
	n     int
}

// Later runs fence and then after on a goroutine of their own, as a batch
// that WaitPending waits for.
func (a *Allocator) Later(fence, after func()) {
	a.mu.Lock()
	done := a.addBatchLocked()
	a.mu.Unlock()
	go func() {
		fence()
		after()
		a.mu.Lock()
		a.endBatchLocked(done)
		a.mu.Unlock()
	}()
}

// WaitPending waits until the batches pending now are done, and returns
// how many bytes of blocks were pending when it was called.
func (a *Allocator) WaitPending() int64 {
	a.mu.Lock()
	n := a.pendingBytes
	waits := make([]chan struct{}, 0, len(a.batches))
	for c := range a.batches {
		waits = append(waits, c)
	}
	a.mu.Unlock()
	for _, c := range waits {
		<-c
	}
	return n
}

// AwaitRoom is the first step of reclaiming room for an allocation of
// want blocks of class c that found none: when the pending blocks would
// make it succeed, alone or with the bytes more that evictable reports the
// caller could free (asked for at least need bytes, it may stop counting
// there), it waits for batches to complete, one after another,
// up to wait (negative: it never waits), rather than have the caller fail
// or evict while the device work finishes. It reports whether there is
// room now.
func (a *Allocator) AwaitRoom(c *Class, want int, deviceFull bool, wait time.Duration, evictable func(need int64) int64) bool {
	if wait < 0 {
		return a.Shortfall(c, want, deviceFull) <= 0
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	checked := false // whether evictable was counted in
	for {
		short := a.Shortfall(c, want, deviceFull)
		if short <= 0 {
			return true
		}
		a.mu.Lock()
		pending := a.pendingBytes
		if pending == 0 || len(a.batches) == 0 {
			a.mu.Unlock()
			return false
		}
		if a.changed == nil {
			a.changed = make(chan struct{})
		}
		changed := a.changed
		// Bytes that no count of bytes can make up: pending blocks may
		// make runs with free blocks the exact count found no run in.
		least := a.leastShortfallLocked(c, want, deviceFull)
		a.mu.Unlock()
		if pending < least && !checked {
			if pending+evictable(least-pending) < least {
				return false // nothing makes the room: fail now
			}
			checked = true
		}
		select {
		case <-changed:
		case <-timer.C:
			return a.Shortfall(c, want, deviceFull) <= 0 // the deadline passed
		}
	}
}
