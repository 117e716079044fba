package store

import (
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
)

func (s *Snap) describe() string {
	return fmt.Sprintf("%s snapshot of owner %q at version %d", s.l.Type, s.owner, s.pos.v)
}

func (s *Snap) logicalBytes() int64 { return s.logical }

// begin starts a read of s: it holds the pool open and s's read lock,
// and fails when s is released or invalidated. A nil error must be
// followed by end.
func (s *Snap) begin(op string) error {
	if s == nil {
		return errNil("Snap", op)
	}
	if err := s.pool.enterAt(s.gate); err != nil {
		return s.errorf(op, "%w", err)
	}
	s.mu.RLock()
	for s.tier != nil && !s.released && !s.invalid.Load() {
		// In the host tier: bring it back under the write lock, then
		// read as any call does.
		s.mu.RUnlock()
		if err := s.back(op); err != nil {
			s.pool.leaveAt(s.gate)
			return err
		}
		s.mu.RLock()
	}
	if s.released {
		s.end()
		return s.errorf(op, "snapshot: %w", ErrReleased)
	}
	if s.invalid.Load() {
		s.end()
		return s.errorf(op, "snapshot: %w", ErrInvalidated)
	}
	if s.evicted {
		s.end()
		return s.errorf(op, "snapshot: %w", ErrEvicted)
	}
	s.pool.touch(&s.lastUse)
	return nil
}

// back brings s back from the host tier, if it is there, under its write
// lock; a cut's other members come back with it, those whose lock is free
// (a member busy with a call brings itself back), as a group's do. The
// caller holds the pool open and not s's lock.
func (s *Snap) back(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tier == nil || s.released || s.invalid.Load() {
		return nil // the caller answers for a released or invalidated one
	}
	if err := s.bringBackLocked(op); err != nil {
		return err
	}
	if c := s.cut; c != nil && c.whole.Load() {
		for _, m := range c.snaps {
			if m == s || !m.mu.TryLock() {
				continue
			}
			if m.tier != nil && !m.released && !m.invalid.Load() {
				_ = m.bringBackLocked(op) // it stays in the tier: its own call answers
			}
			m.mu.Unlock()
		}
	}
	return nil
}

// bringBackLocked gives s its version back from the tier. s.mu is
// write-held.
func (s *Snap) bringBackLocked(op string) error {
	r, _, _, err := s.pool.tier.back(&s.shape, s.tier, true)
	if err != nil {
		return s.errorf(op, "bringing snapshot %d back from the host tier: %w", s.pos.v, err)
	}
	s.r, s.evicted, s.tier = r, false, nil
	return nil
}

// end ends a read begun by begin.
func (s *Snap) end() {
	s.mu.RUnlock()
	s.pool.leaveAt(s.gate)
}

// Read copies rows [from, to) into dst: per column, (to-from) rows' bytes.
func (s *Snap) Read(from, to int, dst [][]byte) error {
	if err := s.begin("Read"); err != nil {
		return err
	}
	defer s.end()
	return s.read("Read", s.r, from, to, dst, false, nil)
}

// ReadColumns copies rows [from, to) into the columns of dst that are not
// nil, as Head.ReadColumns does.
func (s *Snap) ReadColumns(from, to int, dst [][]byte) error {
	if err := s.begin("ReadColumns"); err != nil {
		return err
	}
	defer s.end()
	return s.read("ReadColumns", s.r, from, to, dst, true, nil)
}

// Spans locates rows [from, to) in device memory: per column, one span per
// block. They are read only, by contract: the blocks may be shared.
//
//state:view
func (s *Snap) Spans(from, to int) ([][]device.Span, error) {
	if err := s.begin("Spans"); err != nil {
		return nil, err
	}
	defer s.end()
	return s.spans("Spans", s.r, from, to)
}

// Len returns the snapshot's rows (0 once released).
func (s *Snap) Len() int {
	if s == nil || s.pool.isClosed() {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rowsLocked()
}

// rowsLocked returns the snapshot's rows from its root or its image in
// the host tier; 0 once released or evicted. s.mu is held.
func (s *Snap) rowsLocked() int {
	switch {
	case s.r != nil:
		return s.r.rows
	case s.tier != nil:
		return s.tier.rows
	}
	return 0
}

// Version returns the snapshot's version.
func (s *Snap) Version() Version {
	if s == nil {
		return 0
	}
	return s.pos.v
}

// Release gives up s and the blocks only it holds. Releasing twice does
// nothing; every other call on a released snapshot returns ErrReleased.
//
//state:release
func (s *Snap) Release() error {
	if s == nil {
		return errNil("Snap", "Release")
	}
	s.pool.gate.rlock(s.gate)
	defer s.pool.leaveAt(s.gate)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	s.released = true
	if s.pool.closed.Load() {
		return nil
	}
	s.lin.mu.Lock()
	s.lin.snaps.remove(s)
	s.lin.mu.Unlock()
	s.tmu.Lock()
	releaseTables(s.tables)
	s.tables = nil
	s.tmu.Unlock()
	freed := s.pool.takeFreed()
	if s.r != nil {
		s.r.release(freed)
	}
	s.r = nil
	s.pool.tier.release(s.tier)
	s.tier = nil
	s.pool.freeList(freed)
	s.pool.unregister(s.gate, &s.inPool, s.logical)
	return nil
}

// BlockTable returns a device-resident table of the snapshot's blocks. It
// never changes; it is freed by its Release or the snapshot's.
//
//state:acquire
func (s *Snap) BlockTable() (*BlockTable, error) {
	if err := s.begin("BlockTable"); err != nil {
		return nil, err
	}
	defer s.end()
	t, err := s.pool.tables.newTable(s.pool, &s.shape, s.r, s.recordedStreams)
	if err != nil {
		return nil, s.errorf("BlockTable", "%w", err)
	}
	s.tmu.Lock()
	s.tables = append(s.tables, t)
	s.tmu.Unlock()
	return t, nil
}

// Oldest returns the snapshot's first readable row (see Head.Oldest).
func (s *Snap) Oldest() int {
	if s == nil || s.pool.isClosed() {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.floor(s.rowsLocked())
}

// ReadRows copies the snapshot's rows at indices idx into dst, as
// Head.ReadRows does.
func (s *Snap) ReadRows(idx []int, dst [][]byte) error {
	if s == nil {
		return errNil("Snap", "ReadRows")
	}
	if err := s.begin("ReadRows"); err != nil {
		return err
	}
	defer s.end()
	return s.gather("ReadRows", s.r, idx, dst, nil)
}

// ReadAsync is Head.ReadAsync for a snapshot.
func (s *Snap) ReadAsync(st device.Stream, from, to int, dst [][]byte) error {
	if err := s.begin("ReadAsync"); err != nil {
		return err
	}
	defer s.end()
	return s.queueReads("ReadAsync", s.r, st, from, to, dst)
}

// RecordStream says that work queued on st reads the snapshot's rows: its
// blocks are not reused, zeroed for another owner or freed until that work
// has completed, even when the snapshot is released first. It needs a
// backend with device.Streams; it never waits.
func (s *Snap) RecordStream(st device.Stream) error {
	if err := s.begin("RecordStream"); err != nil {
		return err
	}
	defer s.end()
	if err := checkRecord(s.pool.b, st); err != nil {
		return s.errorf("RecordStream", "%w", err)
	}
	if !s.streams.has(st) { // a snapshot's blocks never change: once is enough
		s.pool.rec.addFrom(s.r, st, nil)
		s.streams.add(st)
	}
	return nil
}

func (s *Snap) recordedStreams() []device.Stream { return s.streams.get() }
