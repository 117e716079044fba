package device

import "fmt"

// HostCopy is one copy from host memory to device memory: Src to Dst.
type HostCopy struct {
	Dst Ptr
	Src []byte
}

// BatchCopier is an optional interface of a Backend that issues several
// copies from the host in one call: a state's write of a row to several
// columns, or of runs of blocks apart in memory, then checks its ranges and
// takes the backend's lock once, and on a stream queues one piece of work.
// A store uses it where a Backend has it, else copies one by one.
type BatchCopier interface {
	// CopiesHtoD copies each Src to its Dst, in order. It stops at the
	// first copy that fails; the copies before it are done.
	CopiesHtoD(copies []HostCopy) error
	// CopiesHtoDAsync queues the copies on st as one piece of work, after
	// checking every range; a range outside a live allocation fails the
	// call and queues nothing. As with CopyHtoDAsync, each Src must stay
	// untouched until an event recorded after the call completes; the
	// slice of copies itself may be reused at once.
	CopiesHtoDAsync(st Stream, copies []HostCopy) error
}

var _ BatchCopier = (*hostBackend)(nil)

func (h *hostBackend) CopiesHtoD(copies []HostCopy) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var in nearRegions // a batch's copies often share an allocation or two
	for _, c := range copies {
		d, err := h.spanNear(&in, c.Dst, len(c.Src))
		if err != nil {
			return fmt.Errorf("device: host copy to device: %w", err)
		}
		copy(d, c.Src)
	}
	return nil
}

// DeviceCopy is one copy within device memory: Bytes bytes from Src to
// Dst.
type DeviceCopy struct {
	Dst, Src Ptr
	Bytes    int
}

// DeviceBatchCopier is an optional interface of a Backend that issues
// several copies within device memory in one call: a checkpointed state's
// delta, a row of each column copied into history every step, checks its
// ranges and takes the backend's lock once. A store uses it where a
// Backend has it, else copies one by one.
type DeviceBatchCopier interface {
	// CopiesDtoD copies each Src range to its Dst, in order, after
	// checking every range: a range outside a live allocation fails the
	// call and copies nothing. A copy the driver refuses stops the call;
	// the copies before it are done. Ranges of one copy may overlap, as
	// CopyDtoD's may.
	CopiesDtoD(copies []DeviceCopy) error
}

var _ DeviceBatchCopier = (*hostBackend)(nil)

func (h *hostBackend) CopiesDtoD(copies []DeviceCopy) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var in nearRegions
	for _, c := range copies {
		if _, err := h.spanNear(&in, c.Src, c.Bytes); err != nil {
			return fmt.Errorf("device: host copy from %#x: %w", uint64(c.Src), err)
		}
		if _, err := h.spanNear(&in, c.Dst, c.Bytes); err != nil {
			return fmt.Errorf("device: host copy to %#x: %w", uint64(c.Dst), err)
		}
	}
	for _, c := range copies {
		s, _ := h.spanNear(&in, c.Src, c.Bytes) // checked above, under the same lock
		d, _ := h.spanNear(&in, c.Dst, c.Bytes)
		copy(d, s) // memmove: overlapping ranges are handled
	}
	return nil
}

// nearRegions are the allocations a batch's last copies went to, looked
// in before the table: a row's copies go to a block of each column, and
// the narrow columns' blocks, which hold many rows, lie in other slabs
// than the wide ones' new blocks.
type nearRegions struct {
	r    [2]*region // in the table, whose entries stay put while h.mu is held
	next int        // the entry the next miss replaces
}

// spanNear is span, looking in *in before the table and leaving there the
// allocation it found. h.mu is held.
func (h *hostBackend) spanNear(in *nearRegions, p Ptr, n int) ([]byte, error) {
	if h.closed {
		return nil, ErrClosed
	}
	for i := range in.r { // by index: a range over the array copies it, and the copy
		r := in.r[i] // waited for the stores that wrote it (2x the batch's time)
		if r == nil {
			break
		}
		if off := uint64(p - r.base); p >= r.base && n >= 0 && off <= r.size && uint64(n) <= r.size-off {
			return r.mem[off : off+uint64(n) : off+uint64(n)], nil
		}
	}
	i, off, err := h.allocs.at(p, n)
	if err != nil {
		return nil, err
	}
	r := &h.allocs.regions[i]
	in.r[in.next] = r
	in.next ^= 1
	return r.mem[off : off+uint64(n) : off+uint64(n)], nil
}

func (h *hostBackend) CopiesHtoDAsync(st Stream, copies []HostCopy) error {
	return queueCopies(h, st, copies, "device: host async copy to device",
		func(c HostCopy) (Ptr, int) { return c.Dst, len(c.Src) },
		func(c HostCopy, d []byte) { copy(d, c.Src) })
}

// queueCopies queues copies on st as one piece of work, every range
// checked first: span says where each copy's device memory lies, and move
// copies between it and the host once it is found, on the stream. The
// copies are the caller's again once they ran.
func queueCopies[C any](h *hostBackend, st Stream, copies []C, what string, span func(C) (Ptr, int), move func(C, []byte)) error {
	s, err := h.stream(st)
	if err != nil {
		return err
	}
	h.mu.RLock()
	var in nearRegions
	for _, c := range copies {
		p, n := span(c)
		if _, err := h.spanNear(&in, p, n); err != nil {
			h.mu.RUnlock()
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	h.mu.RUnlock()
	own := append([]C(nil), copies...)
	return s.enqueue(opFunc(func() error {
		h.unmap.RLock()
		defer h.unmap.RUnlock()
		h.mu.RLock()
		defer h.mu.RUnlock()
		var in nearRegions
		for _, c := range own {
			p, n := span(c)
			d, err := h.spanNear(&in, p, n)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			move(c, d)
		}
		clear(own) // the caller's buffers are not kept
		return nil
	}))
}

// HostRead is one copy from device memory to host memory: Src to Dst.
type HostRead struct {
	Dst []byte
	Src Ptr
}

// BatchReadCopier is an optional interface of a Backend that issues
// several copies to the host in one call: a state's read of a row of
// several columns, or of runs of blocks apart in memory, takes the
// backend's lock once and finds its allocations near one another. It is
// BatchCopier's twin. A store uses it where a Backend has it, else copies
// one by one.
type BatchReadCopier interface {
	// CopiesDtoH copies each Src range to its Dst, in order, as CopyDtoH
	// does one at a time: it stops at the first copy that fails, with
	// the error CopyDtoH answers for it, the copies before it done and
	// those after it not. It returns the index of that copy, or
	// len(copies) when none failed.
	CopiesDtoH(copies []HostRead) (int, error)
}

var _ BatchReadCopier = (*hostBackend)(nil)

func (h *hostBackend) CopiesDtoH(copies []HostRead) (int, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var in nearRegions
	for i, c := range copies {
		s, err := h.spanNear(&in, c.Src, len(c.Dst))
		if err != nil {
			return i, fmt.Errorf("device: host copy to host: %w", err)
		}
		copy(c.Dst, s)
	}
	return len(copies), nil
}

// BatchReader is an optional interface of a Backend with Streams that
// queues several copies to the host in one call: a state's asynchronous
// read of rows that lie in many blocks checks every range and takes the
// backend's lock once, and on the host backend queues one piece of work
// rather than one a block. A store uses it where a Backend has it, else
// queues the copies one by one.
type BatchReader interface {
	// CopiesDtoHAsync queues the copies on st as one piece of work, after
	// checking every range; a range outside a live allocation fails the
	// call and queues nothing. As with CopyDtoHAsync, each Dst is written
	// by the time an event recorded after the call completes, and must
	// not be read or written before; the slice of copies itself may be
	// reused at once.
	CopiesDtoHAsync(st Stream, copies []HostRead) error
}

var _ BatchReader = (*hostBackend)(nil)

func (h *hostBackend) CopiesDtoHAsync(st Stream, copies []HostRead) error {
	return queueCopies(h, st, copies, "device: host async copy to host",
		func(c HostRead) (Ptr, int) { return c.Src, len(c.Dst) },
		func(c HostRead, d []byte) { copy(c.Dst, d) })
}

// BatchRecorder is an optional interface of a Backend with Streams: it
// queues a batch of copies from the host and an event after them as one
// call, which on the host backend is one piece of work on the stream (one
// wake of its goroutine) rather than two. The state store's AppendAsync
// uses it where a Backend has it (docs/BENCHMARKS.md, "Serving paths").
type BatchRecorder interface {
	// CopiesHtoDAsyncRecord queues the copies on st, as CopiesHtoDAsync
	// does, then records an event after them, as Record does, and returns
	// the event. A range outside a live allocation, or a stream closed or
	// foreign, fails the call and queues nothing; a failure a driver
	// reports once some copies are queued leaves them queued, as
	// CopiesHtoDAsync does. The slice of copies may be reused at once;
	// each Src must stay untouched until the event completes.
	CopiesHtoDAsyncRecord(st Stream, copies []HostCopy) (Event, error)
}

var _ BatchRecorder = (*hostBackend)(nil)

// hostBatch is the work CopiesHtoDAsyncRecord queues on a host stream: its
// copies, then its event, in one allocation for up to four copies.
type hostBatch struct {
	h      *hostBackend
	s      *hostStream
	copies []HostCopy
	small  [4]HostCopy
	ev     hostEvent
}

func (h *hostBackend) CopiesHtoDAsyncRecord(st Stream, copies []HostCopy) (Event, error) {
	s, err := h.stream(st)
	if err != nil {
		return nil, err
	}
	h.mu.RLock()
	var in nearRegions
	for _, c := range copies {
		if _, err := h.spanNear(&in, c.Dst, len(c.Src)); err != nil {
			h.mu.RUnlock()
			return nil, fmt.Errorf("device: host async copy to device: %w", err)
		}
	}
	h.mu.RUnlock()
	w := &hostBatch{h: h, s: s}
	w.copies = append(w.small[:0], copies...)
	w.ev.s = s
	if err := s.enqueue(w); err != nil {
		return nil, err
	}
	return &w.ev, nil
}

// run does the copies, then completes the event with the stream's first
// error (this batch's own, when it is the first).
func (w *hostBatch) run() error {
	err := w.copy()
	clear(w.copies) // the sources are the caller's again
	w.ev.complete(err)
	return err
}

func (w *hostBatch) copy() error {
	h := w.h
	h.unmap.RLock()
	defer h.unmap.RUnlock()
	h.mu.RLock()
	defer h.mu.RUnlock()
	var in nearRegions
	for _, c := range w.copies {
		d, err := h.spanNear(&in, c.Dst, len(c.Src))
		if err != nil {
			return fmt.Errorf("device: host async copy to device: %w", err)
		}
		copy(d, c.Src)
	}
	return nil
}
