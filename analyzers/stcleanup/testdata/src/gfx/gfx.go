// Package gfx uses a graphics binding described by extern lines: each
// shape has its leak, reported, and its correct twin, silent.
package gfx

import (
	"errors"
	"fmt"

	"example.com/vk"
	"gfxutil"
)

// ---- frees: a function that destroys its argument; acquire 0 1 ----

func imageMemoryLeak(dev *vk.Device) error {
	img, mem, err := vk.CreateImage(dev) // want `Memory acquired by CreateImage is not released on every path`
	if err != nil {
		return err
	}
	_ = mem
	vk.DestroyImage(dev, img)
	return nil
}

func imageMemory(dev *vk.Device) error {
	img, mem, err := vk.CreateImage(dev)
	if err != nil {
		return err
	}
	defer vk.FreeMemory(dev, mem)
	defer vk.DestroyImage(dev, img)
	return nil
}

func imageDiscarded(dev *vk.Device) error {
	_, _, err := vk.CreateImage(dev) // want `Image acquired by CreateImage is discarded: _ drops it` `Memory acquired by CreateImage is discarded: _ drops it`
	return err
}

// destroyImage destroys both handles on every path: it frees them
// (inferred), so a deferred call of it counts.
func destroyImage(dev *vk.Device, img *vk.Image, mem *vk.Memory) {
	vk.DestroyImage(dev, img)
	vk.FreeMemory(dev, mem)
}

func imageByHelper(dev *vk.Device) error {
	img, mem, err := vk.CreateImage(dev)
	if err != nil {
		return err
	}
	defer destroyImage(dev, img, mem)
	return nil
}

// ---- null tests on a handle that is not a pointer; valid ----

func textureLeak() error {
	t := vk.GenTexture() // want `Texture acquired by GenTexture is not released on every path`
	if err := vk.BindTexture(t); err != nil {
		return err
	}
	vk.DeleteTexture(t)
	return nil
}

func textureValid() error {
	t := vk.GenTexture()
	if !t.Valid() {
		return errors.New("no texture")
	}
	defer vk.DeleteTexture(t)
	return vk.BindTexture(t)
}

func textureZero() error {
	t := vk.GenTexture()
	if t == 0 {
		return errors.New("no texture")
	}
	t.Bind()
	vk.DeleteTexture(t)
	return nil
}

func textureDeferredGuard() error {
	t := vk.GenTexture()
	defer func() {
		if t != 0 {
			vk.DeleteTexture(t)
		}
	}()
	return vk.BindTexture(t)
}

// ---- errmap: a check of a mapped error is a check of the call's ----

// mapErr is an error mapper, inferred from its body.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("gfx: %w", err)
}

// check is a declared one.
//
//state:errmap
func check(err error) error {
	if err != nil {
		return &Error{err}
	}
	return nil
}

type Error struct{ err error }

func (e *Error) Error() string { return e.err.Error() }

func bufferMapped(dev *vk.Device) error {
	b, err := vk.NewBuffer(dev)
	if err := mapErr(err); err != nil {
		return err
	}
	defer b.Destroy()
	return b.Write(nil)
}

func bufferChecked(dev *vk.Device) error {
	b, err := vk.NewBuffer(dev)
	err = check(err)
	if err != nil {
		return err
	}
	b.Destroy()
	return nil
}

func bufferMappedLeak(dev *vk.Device, p []byte) error {
	b, err := vk.NewBuffer(dev) // want `Buffer acquired by NewBuffer is not released on every path`
	if err := mapErr(err); err != nil {
		return err
	}
	if err := b.Write(p); err != nil {
		return err
	}
	b.Destroy()
	return nil
}

// ---- takes onsuccess ----

func submitLeak(dev *vk.Device) error {
	b, err := vk.NewBuffer(dev) // want `Buffer acquired by NewBuffer is not released on every path`
	if err != nil {
		return err
	}
	if err := vk.Submit(dev, b); err != nil {
		return err
	}
	return nil
}

func submit(dev *vk.Device) error {
	b, err := vk.NewBuffer(dev)
	if err != nil {
		return err
	}
	if err := vk.Submit(dev, b); err != nil {
		b.Destroy()
		return err
	}
	return nil
}

func submitReturned(dev *vk.Device) error {
	b, err := vk.NewBuffer(dev)
	if err != nil {
		return err
	}
	return vk.Submit(dev, b)
}

// ---- temporaries: a composite literal only passed to a call ----

func pipelineLeak(dev *vk.Device) (*vk.Pipeline, error) {
	sh, err := vk.NewShader(dev) // want `Shader acquired by NewShader is not released on every path`
	if err != nil {
		return nil, err
	}
	return vk.CreatePipeline(dev, vk.Desc{Shader: sh, Name: "main"})
}

func pipelineLeakPtr(dev *vk.Device) (*vk.Pipeline, error) {
	sh, err := vk.NewShader(dev) // want `Shader acquired by NewShader is not released on every path`
	if err != nil {
		return nil, err
	}
	return vk.CreatePipelineP(dev, &vk.Desc{Shader: sh})
}

func pipeline(dev *vk.Device) (*vk.Pipeline, error) {
	sh, err := vk.NewShader(dev)
	if err != nil {
		return nil, err
	}
	defer sh.Destroy()
	return vk.CreatePipeline(dev, vk.Desc{Shader: sh, Name: "main"})
}

func pipelineTempAcquire(dev *vk.Device) {
	vk.CreatePipelineP(dev, &vk.Desc{Shader: mustShader(dev)}) // want `Pipeline acquired by CreatePipelineP is discarded` `Shader acquired by mustShader is discarded`
}

func mustShader(dev *vk.Device) *vk.Shader {
	sh, err := vk.NewShader(dev)
	if err != nil {
		panic(err)
	}
	return sh
}

// ---- fields of a local struct; a release method with an argument ----

type window struct {
	buf *vk.Buffer
	tex vk.Texture
}

// release destroys what the window holds: it releases the window.
func (w *window) release(dev *vk.Device) {
	w.buf.Destroy()
	vk.DeleteTexture(w.tex)
}

func windowLeak(dev *vk.Device, bad bool) error {
	b, err := vk.NewBuffer(dev) // want `Buffer acquired by NewBuffer is not released on every path`
	if err != nil {
		return err
	}
	w := &window{}
	w.buf = b
	if bad {
		return errors.New("bad")
	}
	w.release(dev)
	return nil
}

func windowReleased(dev *vk.Device, bad bool) error {
	b, err := vk.NewBuffer(dev)
	if err != nil {
		return err
	}
	w := &window{}
	w.buf = b
	w.tex = vk.GenTexture()
	defer w.release(dev)
	if bad {
		return errors.New("bad")
	}
	return nil
}

func windowValue(dev *vk.Device, bad bool) error {
	var w window
	b, err := vk.NewBuffer(dev) // want `Buffer acquired by NewBuffer is not released on every path`
	if err != nil {
		return err
	}
	w.buf = b
	if bad {
		return errors.New("bad")
	}
	w.release(dev)
	return nil
}

// ---- a resource returned beside a non-nil error ----

func openLeak(dev *vk.Device) (*vk.Buffer, error) {
	b, err := vk.NewBuffer(dev) // want `Buffer acquired by NewBuffer is returned beside a non-nil error, and callers discard results on error; call b.Destroy\(\) before that return`
	if err != nil {
		return nil, err
	}
	if err := b.Write(nil); err != nil {
		return b, err
	}
	return b, nil
}

func openLeakNamed(dev *vk.Device) (b *vk.Buffer, err error) {
	b, err = vk.NewBuffer(dev) // want `Buffer acquired by NewBuffer is returned beside a non-nil error`
	if err != nil {
		return
	}
	if err = b.Write(nil); err != nil {
		return
	}
	return
}

func openLeakSentinel(dev *vk.Device, lost bool) (*vk.Buffer, error) {
	b, err := vk.NewBuffer(dev) // want `Buffer acquired by NewBuffer is returned beside a non-nil error`
	if err != nil {
		return nil, err
	}
	if lost {
		return b, vk.ErrLost
	}
	return b, nil
}

func open(dev *vk.Device) (*vk.Buffer, error) {
	b, err := vk.NewBuffer(dev)
	if err != nil {
		return nil, err
	}
	if err := b.Write(nil); err != nil {
		b.Destroy()
		return nil, err
	}
	return b, nil
}

func openNamed(dev *vk.Device) (b *vk.Buffer, err error) {
	b, err = vk.NewBuffer(dev)
	if err != nil {
		return
	}
	defer func() {
		if err != nil {
			b.Destroy()
			b = nil
		}
	}()
	err = b.Write(nil)
	return
}

// ---- returned releasers ----

// newWindow returns its buffer with the func that releases it: inferred.
func newWindow(dev *vk.Device) (*vk.Buffer, func(), error) {
	b, err := vk.NewBuffer(dev)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { b.Destroy() }, nil
}

// openWindow says so with a directive.
//
//state:acquire release=1
func openWindow(dev *vk.Device) (*vk.Buffer, func(), error) {
	return nil, func() {}, nil
}

func releaserLeak(dev *vk.Device) error {
	b, release, err := newWindow(dev) // want `Buffer acquired by newWindow is not released on every path`
	if err != nil {
		return err
	}
	if err := b.Write(nil); err != nil {
		return err
	}
	release()
	return nil
}

func releaserDeferred(dev *vk.Device) error {
	b, release, err := newWindow(dev)
	if err != nil {
		return err
	}
	defer release()
	return b.Write(nil)
}

func releaserDeclared(dev *vk.Device) error {
	b, release, err := openWindow(dev)
	if err != nil {
		return err
	}
	defer release()
	return b.Write(nil)
}

func releaserDeclaredLeak(dev *vk.Device) error {
	b, _, err := openWindow(dev) // want `Buffer acquired by openWindow is not released on every path`
	if err != nil {
		return err
	}
	return b.Write(nil)
}

// ---- children need no release of their own ----

func commands(dev *vk.Device) error {
	pool, err := vk.NewCmdPool(dev)
	if err != nil {
		return err
	}
	defer pool.Destroy()
	cmd := pool.Alloc()
	cmd.Record()
	return nil
}

// ---- a struct released by a method with an argument ----

// newView returns a window holding a new buffer: the window is acquired.
func newView(dev *vk.Device) (*window, error) {
	b, err := vk.NewBuffer(dev)
	if err != nil {
		return nil, err
	}
	return &window{buf: b}, nil
}

func viewLeak(dev *vk.Device, bad bool) error {
	w, err := newView(dev) // want `window acquired by newView is not released on every path; release it before each return`
	if err != nil {
		return err
	}
	if bad {
		return errors.New("bad")
	}
	w.release(dev)
	return nil
}

func view(dev *vk.Device, bad bool) error {
	w, err := newView(dev)
	if err != nil {
		return err
	}
	defer w.release(dev)
	if bad {
		return errors.New("bad")
	}
	return nil
}

// ---- a temporary whose callee's result may keep it ----

type renderer struct{ d *vk.Desc }

func newRenderer(d *vk.Desc) *renderer { return &renderer{d: d} }

func rendererKept(dev *vk.Device) (*renderer, error) {
	sh, err := vk.NewShader(dev)
	if err != nil {
		return nil, err
	}
	return newRenderer(&vk.Desc{Shader: sh}), nil
}

// An error mapper of another package, known through its fact.
func bufferMappedAcross(dev *vk.Device) error {
	b, err := vk.NewBuffer(dev)
	if err := gfxutil.Map(err); err != nil {
		return err
	}
	defer b.Destroy()
	return b.Write(nil)
}
