//go:build linux

package device

import (
	"fmt"
	"unsafe"
)

var _ BatchCopier = (*CUDA)(nil)

// CopiesHtoD copies each Src to its Dst: every range is checked first, and
// the copies run with the context made current once.
func (c *CUDA) CopiesHtoD(copies []HostCopy) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, cp := range copies {
		if err := c.check(cp.Dst, len(cp.Src)); err != nil {
			return fmt.Errorf("device: cuda copy to device: %w", err)
		}
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	for _, cp := range copies {
		if len(cp.Src) == 0 {
			continue
		}
		if r := c.d.memcpyHtoD(uint64(cp.Dst), unsafe.Pointer(unsafe.SliceData(cp.Src)), uint64(len(cp.Src))); r != cuSuccess {
			return fmt.Errorf("device: cuda copy of %d bytes to %#x: %w", len(cp.Src), uint64(cp.Dst), c.d.error("cuMemcpyHtoD_v2", r))
		}
	}
	return nil
}

var _ DeviceBatchCopier = (*CUDA)(nil)

// CopiesDtoD copies each Src range to its Dst: every range is checked
// first, and the copies run with the context made current once.
func (c *CUDA) CopiesDtoD(copies []DeviceCopy) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, cp := range copies {
		if err := c.check(cp.Src, cp.Bytes); err != nil {
			return fmt.Errorf("device: cuda copy from %#x: %w", uint64(cp.Src), err)
		}
		if err := c.check(cp.Dst, cp.Bytes); err != nil {
			return fmt.Errorf("device: cuda copy to %#x: %w", uint64(cp.Dst), err)
		}
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	for _, cp := range copies {
		if cp.Bytes == 0 {
			continue
		}
		if r := c.d.memcpyDtoD(uint64(cp.Dst), uint64(cp.Src), uint64(cp.Bytes)); r != cuSuccess {
			return fmt.Errorf("device: cuda copy of %d bytes from %#x to %#x: %w", cp.Bytes, uint64(cp.Src), uint64(cp.Dst), c.d.error("cuMemcpyDtoD_v2", r))
		}
	}
	return nil
}

var _ BatchReadCopier = (*CUDA)(nil)

// CopiesDtoH copies each Src range to its Dst, in order, each range
// checked as CopyDtoH checks it, under one hold of the lock and with the
// context made current once (at the first copy of any bytes).
func (c *CUDA) CopiesDtoH(copies []HostRead) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	entered := false
	defer func() {
		if entered {
			c.exit()
		}
	}()
	for i, cp := range copies {
		if err := c.check(cp.Src, len(cp.Dst)); err != nil {
			return i, fmt.Errorf("device: cuda copy to host: %w", err)
		}
		if len(cp.Dst) == 0 {
			continue
		}
		if !entered {
			if err := c.enter(); err != nil {
				return i, err
			}
			entered = true
		}
		if r := c.d.memcpyDtoH(unsafe.Pointer(unsafe.SliceData(cp.Dst)), uint64(cp.Src), uint64(len(cp.Dst))); r != cuSuccess {
			return i, fmt.Errorf("device: cuda copy of %d bytes from %#x: %w", len(cp.Dst), uint64(cp.Src), c.d.error("cuMemcpyDtoH_v2", r))
		}
	}
	return len(copies), nil
}

// CopiesHtoDAsync queues the copies on st, every range checked first, with
// the context made current once. A copy the driver refuses after others
// were queued fails the call with those queued.
func (c *CUDA) CopiesHtoDAsync(st Stream, copies []HostCopy) error {
	h, err := c.handle(st)
	if err != nil {
		return err
	}
	return c.call(func() error {
		for _, cp := range copies {
			if err := c.check(cp.Dst, len(cp.Src)); err != nil {
				return fmt.Errorf("device: cuda async copy to device: %w", err)
			}
		}
		for _, cp := range copies {
			if len(cp.Src) == 0 {
				continue
			}
			if r := c.d.async.memcpyHtoDAsync(uint64(cp.Dst), unsafe.Pointer(unsafe.SliceData(cp.Src)), uint64(len(cp.Src)), h); r != cuSuccess {
				return fmt.Errorf("device: cuda async copy of %d bytes to %#x: %w", len(cp.Src), uint64(cp.Dst), c.d.error("cuMemcpyHtoDAsync_v2", r))
			}
		}
		return nil
	})
}

var _ BatchReader = (*CUDA)(nil)

// CopiesDtoHAsync queues the copies to the host on st, every range checked
// first, with the context made current once. A copy the driver refuses
// after others were queued fails the call with those queued.
func (c *CUDA) CopiesDtoHAsync(st Stream, copies []HostRead) error {
	h, err := c.handle(st)
	if err != nil {
		return err
	}
	return c.call(func() error {
		for _, cp := range copies {
			if err := c.check(cp.Src, len(cp.Dst)); err != nil {
				return fmt.Errorf("device: cuda async copy to host: %w", err)
			}
		}
		for _, cp := range copies {
			if len(cp.Dst) == 0 {
				continue
			}
			if r := c.d.async.memcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(cp.Dst)), uint64(cp.Src), uint64(len(cp.Dst)), h); r != cuSuccess {
				return fmt.Errorf("device: cuda async copy of %d bytes from %#x: %w", len(cp.Dst), uint64(cp.Src), c.d.error("cuMemcpyDtoHAsync_v2", r))
			}
		}
		return nil
	})
}

var _ BatchRecorder = (*CUDA)(nil)

// CopiesHtoDAsyncRecord is CopiesHtoDAsync, then Record: the driver's
// calls are the same either way.
func (c *CUDA) CopiesHtoDAsyncRecord(st Stream, copies []HostCopy) (Event, error) {
	if err := c.CopiesHtoDAsync(st, copies); err != nil {
		return nil, err
	}
	return c.Record(st)
}
