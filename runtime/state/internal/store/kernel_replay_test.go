package store

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// A replayed step, At, VersionAt and rollbacks meet rows a kernel writes.

// kernelWritten returns a checkpointed mutable head of rows 0x11 whose
// rows 2 and 3 a kernel fills with 0x5a on st, a stream recorded on the
// head before and after the device write, held back until release (or
// 100ms); all go when t ends.
func kernelWritten(t *testing.T, r *statetest.StreamRig) (*Head, device.Stream, func()) {
	h, st := keepHead(t, r, keepPool(t, r), true, Mutable)
	check(t, h.RecordStream(st))
	release := holdFor(t, r, st, 100*time.Millisecond)
	fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
	check(t, h.RecordStream(st))
	return h, st, release
}

// TestKernelStepHostInPlaceUnderKernel: the kernel of a device write is on
// a stream recorded on the head before; RecordStream is the next call.
// No checkpoint shares the block, yet a StepHost (a host function adding
// one to every byte) does not run in place, before the queued kernel,
// which would then write over the step's rows: as a host write does, it
// copies the block after the kernel, sees the kernel's rows and keeps its
// own.
func TestKernelStepHostInPlaceUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		h, st, release := kernelWritten(t, r)
		inc := func(rows, in [][]byte) ([][]byte, error) {
			for i := range rows[0] {
				rows[0][i]++
			}
			return rows, nil
		}
		within(t, "StepHost", 10*time.Second, func() error { return h.StepHost(nil, false, inc) })
		vs := h.Version()
		release()
		check(t, st.Sync())
		// The history replays the step over the delta of the kernel's rows.
		a := must[*Snap](t)(h.At(vs))
		defer a.Release()
		keptRows(t, a, 0x12, 0x12, 0x5b, 0x5b, 0x12, 0x12, 0x12, 0x12)
		keptRows(t, h, 0x12, 0x12, 0x5b, 0x5b, 0x12, 0x12, 0x12, 0x12)
	})
}

// TestKernelHostWriteInPlaceAfterRecordStream: as above with a host write
// of a kernel row instead of a step (the documented protection).
func TestKernelHostWriteInPlaceAfterRecordStream(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		h, st, release := kernelWritten(t, r)
		check(t, h.Write(2, oneRow(0x22)))
		release()
		check(t, st.Sync())
		keptRows(t, h, 0x11, 0x11, 0x22, 0x5a, 0x11, 0x11, 0x11, 0x11)
	})
}

// TestKernelStepHostInPlaceUnderReadAsync: a ReadAsync queued (held) on a
// stream reads the head's rows; a StepHost (or a host Write) follows. The
// read is of the version it was queued at: the step copies the block for
// it, as the write does, rather than write in place before it.
func TestKernelStepHostInPlaceUnderReadAsync(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		for _, step := range []bool{false, true} {
			t.Run(map[bool]string{false: "Write", true: "StepHost"}[step], func(t *testing.T) {
				p := keepPool(t, r)
				l := keepLayout(false, Mutable)
				l.Checkpoint = &CheckpointPolicy{Every: 100, Keep: 1}
				h := must[*Head](t)(p.NewHead(l, "s"))
				defer h.Release()
				check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
				st := must[device.Stream](t)(r.Streams().NewStream())
				defer st.Close()
				buf := must[[]byte](t)(r.Streams().HostAlloc(keepRows * keepRowBytes))
				defer r.Streams().HostFree(buf)
				release := holdFor(t, r, st, 100*time.Millisecond)
				check(t, h.ReadAsync(st, 0, keepRows, [][]byte{buf}))
				if step {
					within(t, "StepHost", 10*time.Second, func() error {
						return h.StepHost(nil, false, func(rows, in [][]byte) ([][]byte, error) {
							for i := range rows[0] {
								rows[0][i]++
							}
							return rows, nil
						})
					})
				} else {
					check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x12}, keepRows*keepRowBytes)}))
				}
				release()
				check(t, st.Sync())
				if want := bytes.Repeat([]byte{0x11}, len(buf)); !bytes.Equal(buf, want) {
					t.Errorf("ReadAsync queued before the call read %x..., want the version it was queued at (11...)", buf[:8])
				}
				keptRows(t, h, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12)
			})
		}
	})
}

// TestKernelStepVerifyAfterDeviceWrite: as TestKernelStepHostInPlaceUnderKernel
// with verify: the step's hash is of rows the kernel had not written, so
// At of the step's version, which replays it over the kernel's rows,
// must still answer (not ErrReplayDiverged). Also a failing step leaves
// the head as it was, the kernel's rows included.
func TestKernelStepVerifyAfterDeviceWrite(t *testing.T) {
	inc := func(rows, in [][]byte) ([][]byte, error) {
		for i := range rows[0] {
			rows[0][i]++
		}
		return rows, nil
	}
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		h, st, release := kernelWritten(t, r)
		within(t, "StepHost", 10*time.Second, func() error { return h.StepHost(nil, true, inc) })
		vs := h.Version()
		release()
		check(t, st.Sync())
		check(t, h.Write(0, oneRow(0x44)))
		a, err := h.At(vs)
		if err != nil {
			t.Fatalf("At of the verified step's version: %v", err)
		}
		defer a.Release()
		keptRows(t, a, 0x12, 0x12, 0x5b, 0x5b, 0x12, 0x12, 0x12, 0x12)
	})
}

// TestKernelStepFailsAfterDeviceWrite: a step that writes its rows and
// fails, the call after RecordStream after a held kernel's device write;
// the head is as before the step: the kernel's rows.
func TestKernelStepFailsAfterDeviceWrite(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		h, st, release := kernelWritten(t, r)
		v := h.Version()
		within(t, "StepHost", 10*time.Second, func() error {
			err := h.StepHost(nil, false, func(rows, in [][]byte) ([][]byte, error) {
				for i := range rows[0] {
					rows[0][i] = 0xee
				}
				return nil, errors.New("boom")
			})
			if err == nil {
				return errors.New("the failing step answered nil")
			}
			return nil
		})
		release()
		check(t, st.Sync())
		if h.Version() != v {
			t.Errorf("version %d after a failed step, want %d", h.Version(), v)
		}
		keptRows(t, h, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
	})
}

// within runs f in a goroutine and fails t if it does not return in d.
func within(t *testing.T, what string, d time.Duration, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// TestKernelRollbackDeviceWriteAt: rollback, then a device write whose
// kernel is held, RecordStream as the next call, then a host write of
// another row; At of the device write's version reads the kernel's rows.
func TestKernelRollbackDeviceWriteAt(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		l := keepLayout(false, Mutable)
		l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 4}
		h := must[*Head](t)(p.NewHead(l, "s"))
		defer h.Release()
		check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		check(t, h.Write(0, oneRow(0x22)))
		check(t, h.Rollback(s))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		release := holdFor(t, r, st, 100*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
		check(t, h.RecordStream(st))
		v := h.Version()
		check(t, h.Write(7, oneRow(0x33)))
		a := must[*Snap](t)(h.At(v))
		defer a.Release()
		release()
		check(t, st.Sync())
		keptRows(t, h, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x33)
		keptRows(t, a, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
		if n := must[Version](t)(h.VersionAt(8)); n != h.Version() {
			t.Errorf("VersionAt(8) %d, want %d", n, h.Version())
		}
	})
}

// TestKernelStepAfterDeviceWrite: a step (host function adding one to
// every byte) is the call after RecordStream following a device write
// whose kernel is held; every version is checkpointed, so the step
// copies the kernel's block and waits: the step sees the kernel's rows.
// At of the step's version replays it over them.
func TestKernelStepAfterDeviceWrite(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		l := keepLayout(false, Mutable)
		l.Checkpoint = &CheckpointPolicy{Every: 1, Keep: 8}
		h := must[*Head](t)(p.NewHead(l, "s"))
		defer h.Release()
		check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		release := holdFor(t, r, st, 100*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
		check(t, h.RecordStream(st))
		vd := h.Version()
		inc := func(rows, in [][]byte) ([][]byte, error) {
			for i := range rows[0] {
				rows[0][i]++
			}
			return rows, nil
		}
		within(t, "StepHost", 10*time.Second, func() error { return h.StepHost(nil, true, inc) })
		vs := h.Version()
		release()
		check(t, st.Sync())
		keptRows(t, h, 0x12, 0x12, 0x5b, 0x5b, 0x12, 0x12, 0x12, 0x12)
		check(t, h.Write(0, oneRow(0x44)))
		a := must[*Snap](t)(h.At(vd))
		defer a.Release()
		keptRows(t, a, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
		b := must[*Snap](t)(h.At(vs))
		defer b.Release()
		keptRows(t, b, 0x12, 0x12, 0x5b, 0x5b, 0x12, 0x12, 0x12, 0x12)
	})
}

// TestKernelGroupAtKernelRows: a group member's device write, kernel held,
// RecordStream next; a later append in place; group At of the device
// write's version sees the kernel's rows.
func TestKernelGroupAtKernelRows(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		l0 := keepLayout(false, Append)
		l0.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 1}
		l1 := keepLayout(false, Append)
		l1.Checkpoint = &CheckpointPolicy{Every: 3, Keep: 1}
		g := must[*Group](t)(NewGroup(p, "s", l0, l1))
		defer g.Release()
		m := g.Head(0)
		check(t, m.Append(oneRow(0x11)))
		check(t, m.Append(oneRow(0x12)))
		check(t, g.Head(1).Append(oneRow(0x01)))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		release := holdFor(t, r, st, 100*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(m.AppendDevice(2)), 0x5a)
		check(t, m.RecordStream(st))
		check(t, m.Append(oneRow(0x33)))
		v3 := m.Version()
		check(t, m.Append(oneRow(0x44)))
		cut := must[*GroupSnap](t)(g.At(v3))
		defer cut.Release()
		release()
		check(t, st.Sync())
		keptRows(t, m, 0x11, 0x12, 0x5a, 0x5a, 0x33, 0x44)
		keptRows(t, cut.Snap(0), 0x11, 0x12, 0x5a, 0x5a, 0x33)
	})
}

// TestKernelSnapTierRoundTripKernelRows: a snapshot taken as the call
// after a device write (stream recorded before) holds the kernel's block
// alone once the head goes; memory pressure moves it to the host tier;
// it reads the kernel's rows back, and another owner's rows are intact.
func TestKernelSnapTierRoundTripKernelRows(t *testing.T) {
	r := statetest.HostStreamRig(t)
	const bb = keepRows * keepRowBytes
	p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: bb, MaxBytes: 2 * bb, HostTier: 64 << 10}))
	t.Cleanup(func() { check(t, p.Close()) })
	l := keepLayout(false, Mutable)
	l.Retention = Optional
	h, st := recordedHead(t, r, p, l)
	check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
	release := holdFor(t, r, st, 100*time.Millisecond)
	fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
	s := must[*Snap](t)(h.Snapshot())
	defer s.Release()
	check(t, h.Release())
	ol := keepLayout(false, Append)
	ol.Bound = 2 * keepRows
	o := must[*Head](t)(p.NewHead(ol, "o"))
	defer o.Release()
	for i := 0; i < 2*keepRows; i++ {
		check(t, o.Append(oneRow(0x77)))
	}
	if p.Stats().TierOut == 0 {
		t.Fatal("the snapshot did not move to the tier")
	}
	release()
	check(t, st.Sync())
	got := make([]byte, o.Len()*keepRowBytes)
	check(t, o.Read(0, o.Len(), [][]byte{got}))
	if !bytes.Equal(got, bytes.Repeat([]byte{0x77}, len(got))) {
		t.Errorf("another owner's rows overwritten by the kernel")
	}
	check(t, o.Release())
	keptRows(t, s, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
}

// TestKernelVersionAtAfterAppendDevice: VersionAt is the call after an
// AppendDevice (kernel held, stream recorded before); it finds the device
// append's version and the one before, and At of each reads what it held.
func TestKernelVersionAtAfterAppendDevice(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		l := keepLayout(false, Append)
		l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
		h, st := recordedHead(t, r, p, l)
		check(t, h.Append(oneRow(0x11)))
		v1 := h.Version()
		release := holdFor(t, r, st, 100*time.Millisecond)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(2)), 0x5a)
		v3 := h.Version()
		got3 := must[Version](t)(h.VersionAt(3))
		got1 := must[Version](t)(h.VersionAt(1))
		if got3 != v3 || got1 != v1 {
			t.Errorf("VersionAt(3) %d, VersionAt(1) %d; want %d, %d", got3, got1, v3, v1)
		}
		check(t, h.Append(oneRow(0x33)))
		a := must[*Snap](t)(h.At(got3))
		defer a.Release()
		b := must[*Snap](t)(h.At(got1))
		defer b.Release()
		release()
		check(t, st.Sync())
		keptRows(t, a, 0x11, 0x5a, 0x5a)
		keptRows(t, b, 0x11)
		keptRows(t, h, 0x11, 0x5a, 0x5a, 0x33)
		var _ device.Stream = st
	})
}

// TestKernelRollbackAppendUnderReadAsync: a held ReadAsync reads rows
// 0..3 of the tail block; a rollback to a snapshot of one row and an
// append follow. The read returns the rows of its version.
func TestKernelRollbackAppendUnderReadAsync(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := keepPool(t, r)
		h := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer h.Release()
		check(t, h.Append(oneRow(0x11)))
		s := must[*Snap](t)(h.Snapshot())
		defer s.Release()
		check(t, h.Append(oneRow(0x12)))
		check(t, h.Append(oneRow(0x13)))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		buf := must[[]byte](t)(r.Streams().HostAlloc(3 * keepRowBytes))
		defer r.Streams().HostFree(buf)
		release := holdFor(t, r, st, 100*time.Millisecond)
		check(t, h.ReadAsync(st, 0, 3, [][]byte{buf}))
		check(t, h.Rollback(s))
		check(t, h.Append(oneRow(0x33)))
		release()
		check(t, st.Sync())
		rows := []byte{buf[0], buf[keepRowBytes], buf[2*keepRowBytes]}
		if want := []byte{0x11, 0x12, 0x13}; !bytes.Equal(rows, want) {
			t.Errorf("the ReadAsync read %x, want %x", rows, want)
		}
		keptRows(t, h, 0x11, 0x33)
	})
}
