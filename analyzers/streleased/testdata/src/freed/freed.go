// Package freed uses handles destroyed by functions that take them
// (//state:frees) and command buffers that belong to their pool
// (//state:child).
package freed

type Device struct{}
type Image struct{ h uintptr }

// CreateImage returns an image to destroy.
//
//state:acquire
func CreateImage(dev *Device) (*Image, error) { return &Image{}, nil }

// DestroyImage destroys img.
//
//state:frees img
func DestroyImage(dev *Device, img *Image) {}

// Size is a plain use.
func Size(img *Image) int { return 0 }

// destroy frees its image on every path: inferred.
func destroy(dev *Device, img *Image) { DestroyImage(dev, img) }

type Pool struct{}
type Cmd struct{}

// NewPool returns a pool to destroy.
//
//state:acquire
func NewPool() *Pool { return &Pool{} }

// Destroy releases the pool and its command buffers.
//
//state:release
func (p *Pool) Destroy() {}

// Alloc returns a command buffer of the pool.
//
//state:child recv
func (p *Pool) Alloc() *Cmd { return &Cmd{} }

// AllocIn returns a command buffer of pool.
//
//state:child pool
func AllocIn(pool *Pool) *Cmd { return &Cmd{} }

func (c *Cmd) Record() {}

func useAfterDestroy(dev *Device) int {
	img, err := CreateImage(dev)
	if err != nil {
		return 0
	}
	DestroyImage(dev, img)
	return Size(img) // want `Image img is used after DestroyImage released it`
}

func useAfterHelper(dev *Device) int {
	img, err := CreateImage(dev)
	if err != nil {
		return 0
	}
	destroy(dev, img)
	return Size(img) // want `Image img is used after destroy released it`
}

func childAfterParent() {
	pool := NewPool()
	cmd := pool.Alloc()
	cmd2 := AllocIn(pool)
	pool.Destroy()
	cmd.Record()  // want `Cmd cmd is used after Destroy released it`
	cmd2.Record() // want `Cmd cmd2 is used after Destroy released it`
}

// ---- no findings ----

func useBeforeDestroy(dev *Device) int {
	img, err := CreateImage(dev)
	if err != nil {
		return 0
	}
	n := Size(img)
	DestroyImage(dev, img)
	return n
}

func childBeforeParent() {
	pool := NewPool()
	defer pool.Destroy()
	cmd := pool.Alloc()
	cmd.Record()
}
