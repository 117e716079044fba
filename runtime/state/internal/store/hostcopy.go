package store

import "github.com/gpustate/gpustate/runtime/device"

// The copies between the host and blocks. Where device memory is the
// process's (device.HostBytes: the host backend), so is a block's
// (Block.Host), and a copy is the built-in copy:
// no backend call, lock or address lookup, which cost a one-row append or
// read as much as the bytes themselves. Elsewhere the copies go to the
// backend, those of one call in one batch. A pool's blocks are all mapped
// or none, so that a batch's copies are all the backend's or none. A read
// on host memory skips the batch altogether (readHost): building it, and
// joining runs of blocks for it, cost a one-row read more than its copies.

// toBlock copies src into blk from byte off on: at once where blk's
// memory is the process's, else as a copy added to cs, the backend's
// batch, which it returns.
func toBlock(cs []device.HostCopy, blk *block, off int, src []byte) []device.HostCopy {
	if d := blk.Host(off, len(src)); d != nil {
		copy(d, src)
		return cs
	}
	return append(cs, device.HostCopy{Dst: blk.Ptr() + device.Ptr(off), Src: src})
}

// fromBlock copies len(dst) bytes of blk from byte off on into dst, as
// toBlock copies the other way.
func fromBlock(rs []device.HostRead, dst []byte, blk *block, off int) []device.HostRead {
	if s := blk.Host(off, len(dst)); s != nil {
		copy(dst, s)
		return rs
	}
	return append(rs, device.HostRead{Dst: dst, Src: blk.Ptr() + device.Ptr(off)})
}

// blockToBlock copies n bytes of src from byte soff on into dst from byte
// doff on.
func blockToBlock(b device.Backend, dst *block, doff int, src *block, soff, n int) error {
	if d, s := dst.Host(doff, n), src.Host(soff, n); d != nil && s != nil {
		copy(d, s)
		return nil
	}
	return b.CopyDtoD(dst.Ptr()+device.Ptr(doff), src.Ptr()+device.Ptr(soff), n)
}
