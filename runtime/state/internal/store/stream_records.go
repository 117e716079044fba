package store

import (
	"sync"

	"github.com/gpustate/gpustate/runtime/device"
)

// The records of the pool's device memory that stream-ordered work holds
// beyond the calls that queue it: the page-locked staging buffers of the
// async paths (async.go) and the memory of block tables (blocktable.go).
// They are declared apart from the code that uses them, below the pool
// that holds them.

// staging is the pool's page-locked staging buffers (AppendAsync): those
// free, and those the copies queued on a stream may still read. mu guards
// both.
type staging struct {
	mu   sync.Mutex
	free [][]byte
	busy []stagingUse
}

// stagingUse is a staging buffer the copies queued on st before ev read.
type stagingUse struct {
	buf []byte
	st  device.Stream
	ev  device.Event
}

// poolTables is the pool's block tables, each a backend allocation of its
// own, not a slab's block: those live, which Close releases, and the
// memory of tables moved or released, kept for the next ones (alloc). mu
// guards what follows it.
type poolTables struct {
	mu     sync.Mutex
	live   map[releaser]struct{}
	kept   []tableMem
	closed bool // Close freed what was kept: memory given back is freed
}

// tableMem is a backend allocation a block table's column held: its
// address and bytes (blocktable.go).
type tableMem struct {
	ptr   device.Ptr
	bytes int
}

// releaser is a live block table, as the pool knows it: Close releases
// the tables still live (blocktable.go).
type releaser interface{ Release() error }
