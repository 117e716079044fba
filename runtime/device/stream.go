package device

import "errors"

// Streams is the optional interface of a backend that queues work
// asynchronously: a Stream is an ordered queue of device work, an Event marks
// a point in one. Work queued on one stream runs in the order it was queued;
// work on different streams is unordered unless WaitEvent orders it. A
// Backend need not implement Streams; the state store checks with a type
// assertion.
//
// The host buffers given to the async copies must stay untouched (and alive)
// until an event recorded after the copy completes. Buffers from HostAlloc
// are page-locked where the backend has such memory, which is what lets a
// copy run without the caller waiting.
type Streams interface {
	// NewStream makes a stream. Close it when done.
	NewStream() (Stream, error)
	// CopyHtoDAsync queues a copy of src to dst on st.
	CopyHtoDAsync(st Stream, dst Ptr, src []byte) error
	// CopyDtoHAsync queues a copy of len(dst) bytes at src to dst on st.
	CopyDtoHAsync(st Stream, dst []byte, src Ptr) error
	// Record queues an event on st; it completes once all work queued on st
	// before it has completed.
	Record(st Stream) (Event, error)
	// WaitEvent makes work queued on st after this call wait for ev.
	WaitEvent(st Stream, ev Event) error
	// HostAlloc returns bytes bytes of page-locked host memory for staging,
	// outside the Go heap. Give it back with HostFree.
	HostAlloc(bytes int) ([]byte, error)
	// HostFree gives back memory HostAlloc returned.
	HostFree(b []byte) error
}

// StreamCopier is the optional interface of a backend with Streams that
// also queues copies between two ranges of device memory on a stream, after
// the work queued there before. The state store copies a kernel's rows into
// its history this way, so that the copy sees what the kernel wrote
// without the call that takes it waiting for the kernel.
type StreamCopier interface {
	// CopyDtoDAsync queues a copy of bytes bytes from src to dst, both
	// device memory, on st.
	CopyDtoDAsync(st Stream, dst, src Ptr, bytes int) error
}

// Stream is an ordered queue of device work on one backend.
type Stream interface {
	// Sync waits until every piece of work queued so far has completed and
	// answers the first error the stream met, if any.
	Sync() error
	// Close waits for the queued work and frees the stream; later use of it
	// fails with ErrStreamClosed. Close is idempotent.
	Close() error
}

// Event marks a point in a stream. Events are cheap to hold; Close frees
// what the backend keeps for one (a CUDA event), and is idempotent.
type Event interface {
	// Done reports, without waiting, whether the work before the event has
	// completed. The error is the stream's failure, if the work failed.
	Done() (bool, error)
	// Wait blocks until the work before the event has completed.
	Wait() error
	// Close frees the event.
	Close() error
}

// Kernels is the optional interface of a backend that runs kernels: named
// functions of a module, launched on a stream over a grid of blocks of
// threads. The CUDA backend loads modules from PTX text, which the driver
// compiles at run time; the host backend runs Go functions registered under
// the kernels' names (RegisterHostKernel), so one program runs on both.
type Kernels interface {
	// LoadModule loads a module from PTX text (NUL-free). The host backend
	// accepts any text and finds kernels by name among those registered.
	LoadModule(ptx string) (Module, error)
	// Launch queues fn on st. args are the kernel's parameters in order,
	// each a Ptr, int32, uint32, int64, uint64, float32 or float64.
	Launch(st Stream, fn Function, grid, block Dim3, sharedBytes int, args ...any) error
}

// Module is a loaded set of kernels.
type Module interface {
	// Function looks up the kernel named name; a name the module lacks is
	// an error wrapping ErrNoKernel.
	Function(name string) (Function, error)
	// Unload frees the module; its functions may not be launched later.
	Unload() error
}

// Function is a kernel of a loaded module.
type Function interface {
	// Name is the kernel's name.
	Name() string
}

// Dim3 is a grid or block shape. Zero fields count as one.
type Dim3 struct{ X, Y, Z uint32 }

func (d Dim3) norm() Dim3 {
	if d.X == 0 {
		d.X = 1
	}
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Errors of streams and kernels, wrapped with context.
var (
	// ErrStreamClosed: a stream or event used after its Close, or a stream
	// of another backend.
	ErrStreamClosed = errors.New("device: stream closed or foreign")
	// ErrNoKernel: a kernel name neither the module nor the host registry
	// knows.
	ErrNoKernel = errors.New("device: no such kernel")
	// ErrKernelArg: a kernel argument of a type Launch does not pass.
	ErrKernelArg = errors.New("device: bad kernel argument")
)
