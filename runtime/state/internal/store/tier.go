package store

import (
	"errors"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// The host tier's moves to and from device memory (tier_records.go holds
// the tier's memory and images; tier_move.go the handles' side).

// saveRoot copies the blocks of r, which wholly said are its holder's
// alone, to the tier: an image for owner, or an error (nothing is kept
// then). moved is false, with no error, when the tier cannot hold it even
// once its own victims in p are dropped, or the work queued on the streams
// recorded on the blocks failed. That work is waited for first: it may
// still write them.
func (t *hostTier) saveRoot(p *Pool, r *root, blks []*block, owner Owner, skip func(tierVictim) bool) (*tierImage, bool, error) {
	img := &tierImage{owner: owner, rows: r.rows, cols: make([]tierCol, len(r.cols))}
	for c, col := range r.cols {
		img.cols[c] = tierCol{lo: col.lo, n: col.n}
	}
	return t.save(p, img, blks, skip)
}

// saveAll saves roots, each with its blocks blks[i], as saveRoot saves
// one: every image, or none (those saved go back to the tier's free
// memory). A group's members, or a cut's snapshots, move so.
func (t *hostTier) saveAll(p *Pool, roots []*root, blks [][]*block, owner Owner, skip func(tierVictim) bool) ([]*tierImage, bool, error) {
	imgs := make([]*tierImage, 0, len(roots))
	for i, r := range roots {
		img, moved, err := t.saveRoot(p, r, blks[i], owner, skip)
		if !moved {
			for _, done := range imgs {
				t.free(done)
			}
			return nil, false, err
		}
		imgs = append(imgs, img)
	}
	return imgs, true, nil
}

// save copies blks to the tier as img's bytes, as saveRoot says.
func (t *hostTier) save(p *Pool, img *tierImage, blks []*block, skip func(tierVictim) bool) (*tierImage, bool, error) {
	img.bytes = blockBytes(blks)
	if img.bytes > t.max {
		return nil, false, nil
	}
	for !t.alloc(img, blks) {
		if !t.dropOne(p, skip) {
			return nil, false, nil
		}
	}
	dropped, err := t.copyOut(img, blks)
	if dropped || err != nil {
		// dropped: the work a stream queued on the blocks failed, and the
		// pool drops them as it would without a tier.
		t.free(img)
		return nil, false, err
	}
	return img, true, nil
}

// The host tier's copies in stream order (docs/INTERNALS.md, "The host
// tier"): where the backend has streams and the image's memory is
// page-locked, a move out queues its copies on the tier's stream after the
// work of every stream recorded on the blocks (WaitEvent, not a wait of
// the caller), and a move in queues its copies there and returns; the
// head keeps the copies' event as an AppendAsync's (asyncPart.inflight),
// so its later calls wait for it, or order their stream after it, and the
// blocks carry the tier's stream as RecordStream's do, so a release right
// after waits for the copies behind a fence. The image's memory goes back
// to the tier once the event completed (landing).

// copyOut copies blks into img's host blocks. On the tier's stream the copies
// are queued after an event on every stream recorded on the blocks, and
// the call waits for them: the pool frees the device blocks next. dropped
// reports that the work of a recorded stream failed: what the blocks hold
// is no state worth keeping.
func (t *hostTier) copyOut(img *tierImage, blks []*block) (dropped bool, err error) {
	st := t.streamFor(img)
	if st == nil {
		if err := t.awaitRecorded(blks); err != nil {
			return true, nil
		}
		return false, t.runs(img, blks, func(dst []byte, src device.Ptr) error { return t.b.CopyDtoH(dst, src) })
	}
	sb := t.host
	evs, err := t.orderAfterRecorded(sb, st, blks)
	if err == nil {
		err = t.runs(img, blks, func(dst []byte, src device.Ptr) error { return sb.CopyDtoHAsync(st, dst, src) })
	}
	// Whatever was queued writes img's blocks: it completes before
	// they are given back or kept.
	if werr := t.await(st); err == nil {
		err = werr
	}
	for _, ev := range evs {
		// Done once st passed its wait: polled, not waited for.
		done, err := ev.Done()
		if !done {
			err = ev.Wait()
		}
		if err != nil {
			dropped = true
		}
		ev.Close()
	}
	if err != nil {
		return false, err
	}
	return dropped, nil
}

// orderAfterRecorded makes the work queued on st from now on wait for the
// work queued so far on the streams recorded on blks, and returns the
// events it waits for (the caller closes them).
func (t *hostTier) orderAfterRecorded(sb device.Streams, st device.Stream, blks []*block) ([]device.Event, error) {
	var evs []device.Event
	for _, on := range t.recordedOn(blks) {
		if on == st {
			continue // ordered by the stream itself
		}
		ev, err := sb.Record(on)
		if errors.Is(err, device.ErrStreamClosed) {
			continue // closed: its work is done
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if err := sb.WaitEvent(st, ev); err != nil {
			return evs, err
		}
	}
	return evs, nil
}

// recordedOn returns the distinct streams recorded on blks.
func (t *hostTier) recordedOn(blks []*block) []device.Stream {
	if t.rec.n.Load() == 0 {
		return nil
	}
	var sts []device.Stream
	t.rec.mu.Lock()
	defer t.rec.mu.Unlock()
	for _, b := range blks {
		for _, st := range streamsOn(b) {
			if !hasStream(sts, st) {
				sts = append(sts, st)
			}
		}
	}
	return sts
}

// copyIn copies img's host blocks into blks and, once they are copied, img's
// memory is no longer the caller's. On the tier's stream, with wait, the
// call waits for the copies; without, it records the stream on the
// blocks (so that a release waits for the copies), queues the copies and
// an event, and returns the stream and the event (the caller closes it),
// img's memory on the tier's landing list until a second event after the
// copies completes. Synchronous copies return no event. An error leaves
// img in the tier.
func (t *hostTier) copyIn(img *tierImage, blks []*block, wait bool) (device.Stream, device.Event, error) {
	st := t.streamFor(img)
	if st == nil {
		err := t.runs(img, blks, func(src []byte, dst device.Ptr) error { return t.b.CopyHtoD(dst, src) })
		if err == nil {
			t.free(img)
		}
		return nil, nil, err
	}
	sb := t.host
	if !wait {
		t.rec.addAll(blks, st) // a release waits for the copies
	}
	err := t.runs(img, blks, func(src []byte, dst device.Ptr) error { return sb.CopyHtoDAsync(st, dst, src) })
	if wait {
		if werr := t.await(st); err == nil {
			err = werr
		}
		if err == nil {
			t.free(img)
		}
		return nil, nil, err
	}
	var ev, kept device.Event
	if err == nil {
		ev, err = sb.Record(st)
	}
	if err == nil {
		// The landing list's own event: the caller closes ev when it
		// likes, and the list polls kept.
		if kept, err = sb.Record(st); err != nil {
			ev.Close()
		}
	}
	if err != nil {
		// Copies queued before the failure may still read img: it stays
		// in the tier, unchanged, and the blocks wait for them.
		return nil, nil, err
	}
	t.land(img, st, kept)
	return st, ev, nil
}

// runs calls cp once per run of blks that follow one another in device
// memory whose host blocks in img follow one another too: a state's
// blocks, taken in address order, copy in a few calls.
func (t *hostTier) runs(img *tierImage, blks []*block, cp func(host []byte, dev device.Ptr) error) error {
	for i := 0; i < len(blks); {
		n := blks[i].Bytes()
		j := i + 1
		for j < len(blks) && blks[j].Follows(blks[j-1]) && img.blks[j].Follows(img.blks[j-1]) {
			n += blks[j].Bytes()
			j++
		}
		if err := cp(t.hm.bytes(img.blks[i].Ptr(), n), blks[i].Ptr()); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// idle reports whether the work queued so far on the streams recorded on
// blks completes (or fails, which the copy then finds) within wait
// (PoolOptions.PendingWait): the image of a head with a history copies
// blocks its checkpoints keep too, whose streams eviction did not wait
// for (awaitVictimWork waits for those of the blocks it frees), and the
// move must not wait longer for work that may be held back. Where it does
// not complete, the head is evicted as without a tier.
func (t *hostTier) idle(blks []*block, wait time.Duration) bool {
	sts := t.recordedOn(blks)
	if len(sts) == 0 {
		return true
	}
	sb := t.b.(device.Streams) // a stream was recorded: recordStream checked it
	var evs []device.Event
	defer func() {
		for _, ev := range evs {
			ev.Close()
		}
	}()
	for _, st := range sts {
		ev, err := sb.Record(st)
		if errors.Is(err, device.ErrStreamClosed) {
			continue // closed: its work is done
		}
		if err != nil {
			return false
		}
		evs = append(evs, ev)
	}
	deadline := time.Now().Add(max(wait, 0))
	for pause := time.Microsecond; ; pause = min(2*pause, time.Millisecond) {
		busy := false
		for _, ev := range evs {
			if done, err := ev.Done(); !done && err == nil {
				busy = true
				break
			}
		}
		if !busy {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pause)
	}
}

// awaitRecorded waits for the work queued so far on the streams recorded
// on blks: the tier's copy must read what that work wrote.
func (t *hostTier) awaitRecorded(blks []*block) error {
	sts := t.recordedOn(blks)
	if len(sts) == 0 {
		return nil
	}
	sb := t.b.(device.Streams) // a stream was recorded: recordStream checked it
	for _, st := range sts {
		ev, err := sb.Record(st)
		if errors.Is(err, device.ErrStreamClosed) {
			continue
		}
		if err != nil {
			return err
		}
		err = ev.Wait()
		ev.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// back brings img back to device memory as a new root of sh's shape,
// with the blocks' bytes as they were: the root, or an error with img
// still in the tier and nothing taken. The caller holds its handle's lock.
// With wait the call returns once the rows are in device memory; without,
// the copies may still run on st, the tier's stream, and landed, when
// not nil, is the event after them, which the caller closes (copyIn).
func (t *hostTier) back(sh *shape, img *tierImage, wait bool) (r *root, st device.Stream, landed device.Event, err error) {
	counts := make([]int, len(img.cols))
	for c, col := range img.cols {
		counts[c] = col.n - col.lo
	}
	blks, err := sh.allocCols(nil, counts, handDirty)
	if err != nil {
		return nil, nil, nil, err
	}
	if st, landed, err = t.copyIn(img, blks, wait); err != nil {
		var back []*block
		for _, b := range blks {
			releaseBlock(b, &back)
		}
		sh.pool.free(back)
		return nil, nil, nil, err
	}
	r = newRoot(len(img.cols))
	r.rows = img.rows
	var freed []*block
	at := 0
	for c, col := range img.cols {
		rc := &r.cols[c]
		rc.n, rc.lo = col.lo, col.lo
		rb, per := sh.rowBytes[c], sh.perBlock[c]
		for i := col.lo; i < col.n; i++ {
			blks[at].Touch()
			// The version's rows are all the block holds: an append goes
			// on in place (tree.appendsInPlace), in stream order after
			// the copies (asyncPart.orderTier), rather than copy the
			// block before they land.
			blks[at].SetFill((min(img.rows, (i+1)*per) - i*per) * rb)
			rc.set(i, blks[at], &freed)
			at++
		}
	}
	t.in.Add(img.bytes)
	return r, st, landed, nil
}

// tierMover is a victim the host tier may take: moveOut copies it there
// and frees its device blocks. moved false with no error: the tier does not
// take it (shared blocks, a history, no room), and the pool drops it as
// without a tier; an error: the copy failed, and it stays as it was.
type tierMover interface {
	moveOut() (freed int64, moved bool, err error)
}

// tierVictim is a handle the tier holds, which it may drop to make room.
type tierVictim interface {
	inTier() (Victim, bool)
	dropTier() (int64, bool)
}

// tierHead is a head as the host tier sees it (tier_move.go): a victim it
// may take (tierMover) and, once there, one it may drop (tierVictim).
type tierHead struct{ h *Head }

// tierSnap is a snapshot as the host tier sees it (tier_move.go), as
// tierHead is a head.
type tierSnap struct{ s *Snap }

// tierOf returns what the host tier sees of x, a live handle or an
// eviction victim: a head's or a snapshot's tier side, x itself otherwise
// (a group's victim, a cached prefix block), which is a tierMover or a
// tierVictim where it has those methods.
func tierOf(x any) any {
	switch x := x.(type) {
	case *Head:
		return tierHead{x}
	case *Snap:
		return tierSnap{x}
	}
	return x
}

// dropOne drops the tier's victim p's Evictor ranks first (skip spares
// the handles the move under way holds), and reports whether it dropped
// one. A group is one victim, which its first member by id describes and
// drops.
func (t *hostTier) dropOne(p *Pool, skip func(tierVictim) bool) bool {
	handles := p.liveHandles()
	live := make([]tierVictim, 0, len(handles))
	for _, h := range handles {
		if x, ok := tierOf(h).(tierVictim); ok {
			live = append(live, x)
		}
	}
	for _, x := range p.tierPx.list() {
		live = append(live, tierPrefixVictim{p, x})
	}
	var hs []tierVictim
	var vs []Victim
	for _, x := range live {
		if skip != nil && skip(x) {
			continue
		}
		v, ok := x.inTier()
		if !ok {
			continue
		}
		hs = append(hs, x)
		v.ID = uint64(len(hs))
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return false
	}
	p.evictor.Rank(vs)
	for _, v := range vs {
		if v.ID == 0 || v.ID > uint64(len(hs)) {
			continue
		}
		if n, ok := hs[v.ID-1].dropTier(); ok {
			t.dropped.Add(n)
			p.evictedBytes.Add(n)
			p.evictions.Add(1)
			return true
		}
	}
	return false
}

// release drops what a released handle kept in the tier, img (nil: it
// kept nothing, and t may be nil too).
func (t *hostTier) release(img *tierImage) {
	if img != nil {
		t.free(img)
	}
}

// tierPrefixVictim is a cached prefix block in the tier as the tier's
// Evictor sees it.
type tierPrefixVictim struct {
	p *Pool
	x *tierPrefix
}

func (v tierPrefixVictim) inTier() (Victim, bool) {
	return Victim{Owner: string(v.x.owner), Type: v.x.tk.l.Type, Cached: true, Bytes: v.x.img.bytes, LastUse: v.x.used}, true
}

// dropTier drops the record, unless a lookup took it since it was listed.
func (v tierPrefixVictim) dropTier() (int64, bool) {
	tp := &v.p.tierPx
	tp.mu.Lock()
	ok := tp.removeLocked(v.x)
	tp.mu.Unlock()
	if !ok {
		return 0, false
	}
	v.p.tier.free(v.x.img)
	return v.x.img.bytes, true
}

// drop drops the cached prefix blocks of domain d from the tier t (every
// domain's when all), and returns their bytes. t is nil where the pool has
// no tier (and tp no records).
func (tp *tierPrefixes) drop(t *hostTier, d Domain, all bool) int64 {
	var n int64
	for _, x := range tp.forget(d, all) {
		if t != nil {
			t.free(x.img)
		}
		n += x.img.bytes
	}
	return n
}

// prefixBlocks brings a cached prefix block back from the tier: one new
// block per column of sh's layout, in sh's pool, of the owner that wrote
// them, holding what they held. An error leaves x in the tier and takes
// nothing. The caller holds no cache lock: the allocation may reclaim.
func (t *hostTier) prefixBlocks(sh *shape, x *tierPrefix) ([]*block, error) {
	p := sh.pool
	blks := make([]*block, 0, len(sh.cls))
	giveBack := func() {
		var back []*block
		for _, b := range blks {
			releaseBlock(b, &back)
		}
		p.free(back)
	}
	for _, cl := range sh.cls {
		b, err := p.allocIn(nil, cl, x.owner, 1, handDirty)
		if err != nil {
			giveBack()
			return nil, err
		}
		blks = append(blks, b[0])
	}
	if _, _, err := t.copyIn(x.img, blks, true); err != nil {
		giveBack()
		return nil, err
	}
	for _, b := range blks {
		b.Touch()
	}
	return blks, nil
}

// dropHead drops the image of head h, which h.mu holds, and returns its
// bytes: the head is evicted as it would have been without a tier, and
// the caller drops its logical bytes (awayLogical). False when h keeps
// none.
func (t *hostTier) dropHead(h *Head) (int64, bool) {
	if h.tier == nil || h.released {
		return 0, false
	}
	n := h.tier.bytes
	t.free(h.tier)
	h.tier = nil
	return n, true
}

// dropSnap drops the image of snapshot s, which s.mu holds, and returns
// its bytes; false when s keeps none.
func (t *hostTier) dropSnap(s *Snap) (int64, bool) {
	if s.tier == nil || s.released {
		return 0, false
	}
	n := s.tier.bytes
	t.free(s.tier)
	s.tier = nil
	s.pool.addLogical(s.gate, -s.logical)
	s.logical = 0
	return n, true
}
