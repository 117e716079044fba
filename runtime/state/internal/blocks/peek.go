package blocks

import "github.com/gpustate/gpustate/runtime/device"

// NextClean returns the address of the block an allocation of class c
// takes first from its clean list (Alloc pops the list's top, which walks
// memory upwards), and false when the list is empty. The cost model reads
// it to count the pages the next new blocks touch first.
func (a *Allocator) NextClean(c *Class) (device.Ptr, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(c.clean) == 0 {
		return 0, false
	}
	return c.clean[len(c.clean)-1].ptr, true
}
