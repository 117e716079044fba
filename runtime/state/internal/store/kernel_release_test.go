package store

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestKernelRowsReleaseFreesBlockUnderKernel: the kernel of an
// AppendDevice is on a stream recorded on the head before the block was
// taken. The head is released while the kernel has not run: its block
// goes to no other head (of the same owner: no zeroing) until the kernel
// ran, else the kernel would write that head's rows.
func TestKernelRowsReleaseFreesBlockUnderKernel(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		defer p.Close()
		h := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		check(t, h.RecordStream(st))
		r.Hold(t, st)
		var once sync.Once
		release := func() { once.Do(r.Release) }
		defer release()
		time.AfterFunc(5*time.Second, release)
		fillOn(t, r, st, must[[][]device.Span](t)(h.AppendDevice(3)), 0x5a)
		check(t, h.Read(0, 1, [][]byte{make([]byte, keepRowBytes)})) // the next call
		check(t, h.Release())
		o := must[*Head](t)(p.NewHead(keepLayout(false, Append), "s"))
		defer o.Release()
		check(t, o.Append([][]byte{bytes.Repeat([]byte{0x77}, keepRows*keepRowBytes)}))
		release()
		check(t, st.Sync())
		keptRows(t, o, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77)
	})
}
