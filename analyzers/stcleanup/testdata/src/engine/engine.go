// Package engine is an inference engine's batch loop: a context held in
// fields of named results, deferred closures, goroutines and wrapper
// structs. Each leak is reported; each correct twin is silent.
package engine

import "errors"

// Backend makes contexts.
type Backend interface {
	//state:acquire
	NewContext() Context
}

// Context is a device context.
type Context interface {
	//state:release
	Close()
	Forward(n int) error
}

type batch struct {
	ctx  Context
	size int
}

var errIdle = errors.New("idle")

// ---- a field of a named result ----

func nextBatchIdleLeak(b Backend, idle bool) (out batch, err error) {
	out.ctx = b.NewContext() // want `Context acquired by NewContext is overwritten before it is released`
	if idle {
		out.ctx = nil // dropped without Close
		return out, nil
	}
	return out, nil
}

func nextBatchIdle(b Backend, idle bool) (out batch, err error) {
	out.ctx = b.NewContext()
	if idle {
		out.ctx.Close()
		out.ctx = nil
		return out, nil
	}
	return out, nil
}

func nextBatchPtrLeak(b Backend, idle bool) (out *batch, err error) {
	out = &batch{}
	out.ctx = b.NewContext() // want `Context acquired by NewContext is returned beside a non-nil error`
	if idle {
		return out, errIdle
	}
	return out, nil
}

// ---- a deferred closure that drops it on the error path ----

func buildDeferredLeak(b Backend, n int) (out *batch, err error) {
	ctx := b.NewContext() // want `Context acquired by NewContext is returned beside a non-nil error`
	out = &batch{ctx: ctx}
	defer func() {
		if err != nil {
			out = nil
		}
	}()
	err = ctx.Forward(n)
	return
}

func buildDeferred(b Backend, n int) (out *batch, err error) {
	ctx := b.NewContext()
	out = &batch{ctx: ctx}
	defer func() {
		if err != nil {
			ctx.Close()
			out = nil
		}
	}()
	err = ctx.Forward(n)
	return
}

// ---- a wrapper struct handed to a goroutine ----

func (w *batch) run() {
	defer w.ctx.Close()
	_ = w.ctx.Forward(w.size)
}

func spawnLeak(b Backend, n int) error {
	w := &batch{ctx: b.NewContext(), size: n} // want `Context acquired by NewContext is not released on every path`
	if n == 0 {
		return errors.New("empty batch") // the wrapper is dropped before the goroutine takes it
	}
	go w.run()
	return nil
}

func spawn(b Backend, n int) error {
	if n == 0 {
		return errors.New("empty batch")
	}
	w := &batch{ctx: b.NewContext(), size: n}
	go w.run()
	return nil
}

// ---- dropped between the function that builds it and the one that takes it ----

func newBatch(b Backend, n int) *batch {
	return &batch{ctx: b.NewContext(), size: n}
}

//state:takes w
func schedule(w *batch) {}

func scheduleLeak(b Backend, n int) error {
	w := newBatch(b, n) // want `batch acquired by newBatch is not released on every path`
	if n > 64 {
		return errors.New("too large")
	}
	schedule(w)
	return nil
}

func scheduleAll(b Backend, n int) error {
	if n > 64 {
		return errors.New("too large")
	}
	schedule(newBatch(b, n))
	return nil
}
