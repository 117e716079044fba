// Package kv declares a state with declared prefix sharing, its snapshot and
// its device spans the way stategen's output does.
package kv

import (
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/stateimpl"
)

// PromptSpans locates rows of a Prompt state in device memory.
type PromptSpans struct{ Token, Hidden []device.Span }

// PromptState is a head whose full blocks may be shared.
type PromptState struct {
	h *stateimpl.Head
}

// NewPromptStateShared creates an empty Prompt state in the sharing domain
// domain.
//
//state:acquire
func NewPromptStateShared(p *state.Pool, owner state.Owner, domain state.Domain) (*PromptState, error) {
	return &PromptState{}, nil
}

// AdoptPrefix takes the longest chain of cached blocks whose Token values
// match keys, read only, and returns the rows it adopted.
//
//state:appends
func (s *PromptState) AdoptPrefix(keys []int32) (int, error) { return 0, nil }

// AppendDevice appends n rows for a kernel to fill: the spans are the
// caller's until the next call on the state.
//
//state:appends
func (s *PromptState) AppendDevice(n int) (PromptSpans, error) { return PromptSpans{}, nil }

// Spans locates rows for kernels that read them: never write through them.
//
//state:view
func (s *PromptState) Spans(from, to int) (PromptSpans, error) { return PromptSpans{}, nil }

// Snapshot returns an immutable snapshot.
//
//state:acquire
func (s *PromptState) Snapshot() (*PromptSnapshot, error) { return &PromptSnapshot{}, nil }

// Len is a plain read.
func (s *PromptState) Len() int { return 0 }

// Release releases the head.
//
//state:release
func (s *PromptState) Release() error { return nil }

// PromptSnapshot is an immutable snapshot.
//
//state:snapshot
type PromptSnapshot struct{}

// Spans locates the snapshot's rows: read only, by contract.
//
//state:view
func (v *PromptSnapshot) Spans(from, to int) (PromptSpans, error) { return PromptSpans{}, nil }

// Len is a plain read.
func (v *PromptSnapshot) Len() int { return 0 }

// Release releases the snapshot.
//
//state:release
func (v *PromptSnapshot) Release() error { return nil }
