package device

// AllocZeroer is an optional interface of a Backend whose Alloc returns
// memory that already reads as zeros (the host backend's pages come zeroed
// from the operating system). A store that must hand out zeroed memory
// skips zeroing what such an Alloc returns; a backend without it, or whose
// AllocZeroes answers false, is zeroed by the store.
type AllocZeroer interface {
	AllocZeroes() bool
}

// AllocZeroes reports that the host backend's Alloc returns zeroed memory:
// anonymous pages are zero-filled by the kernel.
func (h *hostBackend) AllocZeroes() bool { return true }
