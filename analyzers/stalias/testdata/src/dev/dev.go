// Package dev declares a state head, its snapshot and its device spans the
// way stategen's output does.
package dev

import "github.com/gpustate/gpustate/runtime/device"

// KVSpans locates rows of a KV state in device memory.
type KVSpans struct{ Keys, Values []device.Span }

// KVState is a head.
type KVState struct{}

// KV is a batch of rows.
type KV struct{ Keys, Values []float32 }

// Append appends rows.
//
//state:appends
func (s *KVState) Append(rows KV) error { return nil }

// AppendDevice appends n rows for a kernel to fill: the spans are the
// caller's until the next call on the state.
//
//state:appends
func (s *KVState) AppendDevice(n int) (KVSpans, error) { return KVSpans{}, nil }

// WriteDevice hands out rows [from, to) for a kernel to rewrite.
//
//state:mutates
func (s *KVState) WriteDevice(from, to int) (KVSpans, error) { return KVSpans{}, nil }

// Spans locates rows for kernels that read them: never write through them.
//
//state:view
func (s *KVState) Spans(from, to int) (KVSpans, error) { return KVSpans{}, nil }

// Snapshot returns an immutable snapshot.
//
//state:acquire
func (s *KVState) Snapshot() (*KVSnapshot, error) { return &KVSnapshot{}, nil }

// Branch returns an isolated branch.
//
//state:acquire
func (s *KVState) Branch() (*KVState, error) { return &KVState{}, nil }

// Len is a plain read.
func (s *KVState) Len() int { return 0 }

// Release releases the head.
//
//state:release
func (s *KVState) Release() error { return nil }

// KVSnapshot is an immutable snapshot.
//
//state:snapshot
type KVSnapshot struct{}

// Spans locates the snapshot's rows: read only, by contract.
//
//state:view
func (v *KVSnapshot) Spans(from, to int) (KVSpans, error) { return KVSpans{}, nil }

// Len is a plain read.
func (v *KVSnapshot) Len() int { return 0 }

// Release releases the snapshot.
//
//state:release
func (v *KVSnapshot) Release() error { return nil }

// Scale stands in for a kernel launch that rewrites dst in place.
//
//state:writes dst
func Scale(dst []device.Span, factor float32) error { return nil }

// Gather stands in for a kernel launch that only reads src.
func Gather(out []float32, src []device.Span) error { return nil }
