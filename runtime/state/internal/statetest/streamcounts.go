package statetest

import (
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// Host returns the host backend, closed when t ends.
func Host(t testing.TB) device.Backend {
	b := device.Host()
	t.Cleanup(func() { b.Close() })
	return b
}

// StreamCounts is Counts over a backend with streams: it also shows
// device.Streams, and counts the streams' copies ("CopyHtoDAsync",
// "CopyDtoHAsync", with their bytes) and events ("Record") by method
// name. Its Faults decides which of those calls fail (OpAsync, OpRecord,
// or ArmMethod with the method's name): a call it fails is counted and
// does not reach the backend. Faults only decides; the calls it lets
// through go to the wrapped backend, and the synchronous calls never fail.
// Its other optional interfaces stay hidden: BatchCounts shows the
// batches.
type StreamCounts struct {
	*Counts
	device.Streams
	Faults *Faults
}

// NewStreamCounts returns b wrapped, with every count 0 and no fault
// armed; b must implement device.Streams.
func NewStreamCounts(b device.Backend) *StreamCounts {
	s, ok := b.(device.Streams)
	if !ok {
		panic(fmt.Sprintf("statetest: backend %T has no streams", b))
	}
	return &StreamCounts{Counts: NewCounts(b), Streams: s, Faults: NewFaults(b)}
}

func (c *StreamCounts) CopyHtoDAsync(st device.Stream, dst device.Ptr, src []byte) error {
	c.Count("CopyHtoDAsync", len(src))
	if err := c.Faults.Check(OpAsync, "CopyHtoDAsync"); err != nil {
		return err
	}
	return c.Streams.CopyHtoDAsync(st, dst, src)
}

func (c *StreamCounts) CopyDtoHAsync(st device.Stream, dst []byte, src device.Ptr) error {
	c.Count("CopyDtoHAsync", len(dst))
	if err := c.Faults.Check(OpAsync, "CopyDtoHAsync"); err != nil {
		return err
	}
	return c.Streams.CopyDtoHAsync(st, dst, src)
}

func (c *StreamCounts) Record(st device.Stream) (device.Event, error) {
	c.Count("Record", 0)
	if err := c.Faults.Check(OpRecord, "Record"); err != nil {
		return nil, err
	}
	return c.Streams.Record(st)
}

// BatchCounts is StreamCounts that also shows the batches of copies of
// device.BatchCopier, device.BatchReadCopier and device.BatchReader,
// counted as one call each ("CopiesHtoD", "CopiesHtoDAsync",
// "CopiesDtoH", "CopiesDtoHAsync", with the bytes of all their copies).
// To Faults a batch is one call of kind OpCopy, which a fault fails whole
// (a batch of copies to the host fails at its first copy).
type BatchCounts struct{ *StreamCounts }

// NewBatchCounts returns b wrapped, with every count 0 and no fault
// armed; b must implement device.Streams, device.BatchCopier,
// device.BatchReadCopier and device.BatchReader.
func NewBatchCounts(b device.Backend) *BatchCounts {
	_, copier := b.(device.BatchCopier)
	_, readCopier := b.(device.BatchReadCopier)
	_, reader := b.(device.BatchReader)
	if !copier || !readCopier || !reader {
		panic(fmt.Sprintf("statetest: backend %T has no batches", b))
	}
	return &BatchCounts{NewStreamCounts(b)}
}

func (c *BatchCounts) CopiesHtoD(cs []device.HostCopy) error {
	c.Count("CopiesHtoD", hostCopyBytes(cs))
	if err := c.Faults.Check(OpCopy, "CopiesHtoD"); err != nil {
		return err
	}
	return c.Backend.(device.BatchCopier).CopiesHtoD(cs)
}

func (c *BatchCounts) CopiesHtoDAsync(st device.Stream, cs []device.HostCopy) error {
	c.Count("CopiesHtoDAsync", hostCopyBytes(cs))
	if err := c.Faults.Check(OpCopy, "CopiesHtoDAsync"); err != nil {
		return err
	}
	return c.Backend.(device.BatchCopier).CopiesHtoDAsync(st, cs)
}

func (c *BatchCounts) CopiesDtoH(cs []device.HostRead) (int, error) {
	c.Count("CopiesDtoH", hostReadBytes(cs))
	if err := c.Faults.Check(OpCopy, "CopiesDtoH"); err != nil {
		return 0, err
	}
	return c.Backend.(device.BatchReadCopier).CopiesDtoH(cs)
}

func (c *BatchCounts) CopiesDtoHAsync(st device.Stream, cs []device.HostRead) error {
	c.Count("CopiesDtoHAsync", hostReadBytes(cs))
	if err := c.Faults.Check(OpCopy, "CopiesDtoHAsync"); err != nil {
		return err
	}
	return c.Backend.(device.BatchReader).CopiesDtoHAsync(st, cs)
}

// RecordCounts is BatchCounts that also shows device.BatchRecorder: a
// batch of copies and its event in one call ("CopiesHtoDAsyncRecord"),
// counted as such, of kind OpCopy to Faults.
type RecordCounts struct{ *BatchCounts }

// NewRecordCounts returns b wrapped, with every count 0 and no fault
// armed; b must implement what NewBatchCounts asks, and
// device.BatchRecorder.
func NewRecordCounts(b device.Backend) *RecordCounts {
	if _, ok := b.(device.BatchRecorder); !ok {
		panic(fmt.Sprintf("statetest: backend %T records no batches", b))
	}
	return &RecordCounts{NewBatchCounts(b)}
}

func (c *RecordCounts) CopiesHtoDAsyncRecord(st device.Stream, cs []device.HostCopy) (device.Event, error) {
	c.Count("CopiesHtoDAsyncRecord", hostCopyBytes(cs))
	if err := c.Faults.Check(OpCopy, "CopiesHtoDAsyncRecord"); err != nil {
		return nil, err
	}
	return c.Backend.(device.BatchRecorder).CopiesHtoDAsyncRecord(st, cs)
}

func hostCopyBytes(cs []device.HostCopy) int {
	n := 0
	for _, c := range cs {
		n += len(c.Src)
	}
	return n
}

func hostReadBytes(cs []device.HostRead) int {
	n := 0
	for _, r := range cs {
		n += len(r.Dst)
	}
	return n
}
