package state

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gpustate/gpustate/runtime/device"
)

// errInjected is the error a faultBackend returns.
var errInjected = errors.New("injected fault")

// opKind names the backend calls a faultBackend can fail.
type opKind int

const (
	opAlloc opKind = 1 << iota
	opCopy
	opMemset
	opAll = opAlloc | opCopy | opMemset
)

// faultBackend wraps a backend and fails one of its calls on demand: the
// n-th call (counted from arm) of the kinds armed. It counts every call.
type faultBackend struct {
	device.Backend

	mu     sync.Mutex
	kinds  opKind
	left   int // calls of the armed kinds before the one that fails; -1: none armed
	fired  bool
	calls  int
	allocs int
}

func newFaultBackend(b device.Backend) *faultBackend {
	return &faultBackend{Backend: b, left: -1}
}

// arm makes the n-th next call of the given kinds fail (n counted from 0).
func (f *faultBackend) arm(kinds opKind, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kinds, f.left, f.fired = kinds, n, false
}

// disarm cancels the armed fault and reports whether it fired.
func (f *faultBackend) disarm() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	fired := f.fired
	f.left, f.fired = -1, false
	return fired
}

func (f *faultBackend) check(k opKind, what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if k == opAlloc {
		f.allocs++
	}
	if f.left < 0 || f.kinds&k == 0 {
		return nil
	}
	if f.left > 0 {
		f.left--
		return nil
	}
	f.left, f.fired = -1, true
	if k == opAlloc {
		return fmt.Errorf("%s: %w: %w", what, errInjected, device.ErrOutOfMemory)
	}
	return fmt.Errorf("%s: %w", what, errInjected)
}

func (f *faultBackend) Alloc(n int) (device.Ptr, error) {
	if err := f.check(opAlloc, "alloc"); err != nil {
		return 0, err
	}
	return f.Backend.Alloc(n)
}

func (f *faultBackend) CopyHtoD(dst device.Ptr, src []byte) error {
	if err := f.check(opCopy, "copy to device"); err != nil {
		return err
	}
	return f.Backend.CopyHtoD(dst, src)
}

func (f *faultBackend) CopyDtoH(dst []byte, src device.Ptr) error {
	if err := f.check(opCopy, "copy to host"); err != nil {
		return err
	}
	return f.Backend.CopyDtoH(dst, src)
}

func (f *faultBackend) CopyDtoD(dst, src device.Ptr, n int) error {
	if err := f.check(opCopy, "copy on device"); err != nil {
		return err
	}
	return f.Backend.CopyDtoD(dst, src, n)
}

func (f *faultBackend) Memset(dst device.Ptr, v byte, n int) error {
	if err := f.check(opMemset, "memset"); err != nil {
		return err
	}
	return f.Backend.Memset(dst, v, n)
}
