package store

import "fmt"

func (h *Head) describe() string {
	return fmt.Sprintf("%s head of owner %q at version %d", h.l.Type, h.owner, h.pos.v)
}

func (h *Head) logicalBytes() int64 { return h.logical }

// begin starts a call: it holds the pool open and h's lock, and fails
// when h is released or invalidated. A nil error must be followed by end.
func (h *Head) begin(op string) error { return h.open(call{op: op, land: true, share: true}) }

// open starts a call: it holds the pool open and h's lock, and prepares
// h (prepareLocked).
func (h *Head) open(c call) error {
	if h == nil {
		return errNil("Head", c.op)
	}
	if err := h.pool.enter(); err != nil {
		return h.errorf(c.op, "%w", err)
	}
	h.mu.Lock()
	if err := h.prepareLocked(c); err != nil {
		h.end()
		return err
	}
	return nil
}

// prepareLocked is the one preparation of a call once h.mu is held: open
// runs it, Merge runs it on both heads, a group on each member (group.go),
// so that no call starts otherwise. It fails when h is released or
// invalidated, then runs the parts' prepare hooks in order: eviction
// rebuilds an evicted reconstructable head and stamps the use clock, the
// async part waits for the copies of earlier AppendAsync calls (c.land),
// history takes the delta a kernel's write left pending, and sharing
// registers the blocks that rows a kernel wrote filled (c.share).
func (h *Head) prepareLocked(c call) error {
	if err := h.usableLocked(c.op); err != nil {
		return err
	}
	h.deviceRows = false // the caller's kernels are queued by now
	return h.parts.prepare(h, c)
}

// usableLocked fails when h is released or invalidated. h.mu is held.
func (h *Head) usableLocked(op string) error {
	if h.released {
		return h.errorf(op, "%w", ErrReleased)
	}
	if h.invalid.Load() {
		return h.errorf(op, "%w", ErrInvalidated)
	}
	return nil
}

// usable is usableLocked for a call that has not opened h: it answers, as
// open would, for the checks a call makes before its opening, ErrEvicted
// for a head the pool dropped included (open's rebuild answers it; a head
// in the host tier or one that rebuilds is usable).
func (h *Head) usable(op string) error {
	if err := h.pool.enter(); err != nil {
		return h.errorf(op, "%w", err)
	}
	defer h.pool.leave()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.usableLocked(op); err != nil {
		return err
	}
	if h.evictedForGood() {
		return h.errorf(op, "%w", ErrEvicted)
	}
	return nil
}

// end ends a call begun by begin.
func (h *Head) end() {
	h.mu.Unlock()
	h.pool.closeMu.RUnlock()
}

// commitVersion moves h to a new version of its lineage, starting a new
// segment when h does not write at the tip of its own.
func (h *Head) commitVersion() {
	h.lin.mu.Lock()
	if !h.owned {
		h.pos.seg = newSegment(h.pos.seg, h.pos.v)
		h.owned = true
	}
	h.pos.v = h.lin.next()
	h.lin.mu.Unlock()
	h.setLogical()
}

// setLogical brings the pool's LogicalBytes up to date with h's rows, and
// tells the parts that h's root changed: from row h.writeFrom on, when a
// write set it (writing), else anywhere.
func (h *Head) setLogical() {
	l := h.logicalOf(h.r)
	h.pool.logical.Add(l - h.logical)
	h.logical = l
	h.parts.changed(h)
	h.writeFrom = 0
}

// committed tells the parts that a write made h's new version: rows
// [w.from, w.to). h.mu is held.
func (h *Head) committed(w written) {
	h.deviceRows = w.device
	h.parts.committed(h, w)
}

// moved finishes a change of h's version other than by a write (a
// rollback, a merge, a rebuild): the pool's accounting and the parts'
// changed and moved hooks. h.mu is held.
func (h *Head) moved() {
	h.setLogical()
	h.parts.moved(h)
}

// Len returns the number of rows (0 once released, or evicted unless
// reconstructable or in the host tier): for a window state,
// every row ever appended, of which rows [Oldest(), Len()) are readable.
func (h *Head) Len() int {
	if h == nil || h.pool.isClosed() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.r == nil {
		if h.tier != nil {
			return h.tier.rows
		}
		if h.evicted && h.hist != nil {
			if t := h.hist.find(h.pos.v); t >= 0 {
				return h.hist.entries[t].rows
			}
		}
		return 0
	}
	return h.r.rows
}

// Bound returns the layout's bound (<= 0: unbounded).
func (h *Head) Bound() int {
	if h == nil {
		return 0
	}
	return h.l.Bound
}

// Version returns the head's version.
func (h *Head) Version() Version {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pos.v
}

// uncoupled answers ErrCoupled when h is a member of a group: op moves or
// releases h, which is the group's to do.
func (h *Head) uncoupled(op string) error {
	if h != nil && h.group.Load() != nil {
		return h.errorf(op, "the head is a member of a group, which moves and releases its members together; call %s on the group: %w", op, ErrCoupled)
	}
	return nil
}

// live answers ErrReleased for a released head. Merge and Rollback check
// it before their arguments, so that a released head answers ErrReleased
// whatever it is passed; begin checks it again under the lock it holds.
func (h *Head) live(op string) error {
	h.mu.Lock()
	released := h.released
	h.mu.Unlock()
	if released {
		return h.errorf(op, "%w", ErrReleased)
	}
	return nil
}

// Oldest returns the first readable row: Len()-Window for a window state
// that has passed its window, else 0.
func (h *Head) Oldest() int {
	if h == nil || h.pool.isClosed() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.r == nil {
		if h.tier != nil {
			return h.floor(h.tier.rows)
		}
		return 0
	}
	return h.floor(h.r.rows)
}

// Window returns the layout's window (0: none).
func (h *Head) Window() int {
	if h == nil {
		return 0
	}
	return h.l.Window
}

// evictedForGood reports whether h was evicted and no call rebuilds it or
// brings it back: it is not in the host tier, and its retention is
// optional and no failed step lost it, or it keeps no history. h.mu is
// held.
func (h *Head) evictedForGood() bool {
	return h.evicted && h.tier == nil && ((h.l.Retention != Reconstructable && !h.lost) || h.hist == nil)
}
