// Package kv declares a state with declared prefix sharing the way
// stategen's output does: each handle wraps a runtime head.
package kv

import "github.com/gpustate/gpustate/runtime/state"

// Prompt is a batch of rows, keyed by Token.
type Prompt struct {
	Token  []int32
	Hidden []float32
}

var _Prompt_layout = state.Layout{Type: "Prompt", ShareKey: "Token"}

// PromptState is a head of Prompt rows.
type PromptState struct {
	h *state.Head
}

// NewPromptState creates an empty Prompt state that shares nothing.
//
//state:acquire
func NewPromptState(p *state.Pool, owner state.Owner) (*PromptState, error) {
	h, err := p.NewHead(&_Prompt_layout, owner)
	if err != nil {
		return nil, err
	}
	return &PromptState{h: h}, nil
}

// NewPromptStateShared creates an empty Prompt state in the sharing domain
// domain.
//
//state:acquire
func NewPromptStateShared(p *state.Pool, owner state.Owner, domain state.Domain) (*PromptState, error) {
	h, err := p.NewSharedHead(&_Prompt_layout, owner, domain)
	if err != nil {
		return nil, err
	}
	return &PromptState{h: h}, nil
}

// AdoptPrefix takes the longest chain of cached blocks whose Token values
// match keys and returns the rows it adopted.
//
//state:appends
func (s *PromptState) AdoptPrefix(keys []int32) (int, error) {
	return s.h.AdoptPrefix(state.Bytes(keys))
}

// Append appends the rows of a batch.
//
//state:appends
func (s *PromptState) Append(rows Prompt) error {
	return s.h.Append([][]byte{state.Bytes(rows.Token), state.Bytes(rows.Hidden)})
}

// Len is the number of rows.
func (s *PromptState) Len() int { return s.h.Len() }

// Release gives the state's blocks back to the pool.
//
//state:release
func (s *PromptState) Release() error {
	return s.h.Release()
}

// Read copies rows [from, to) out, through the helper a head and a
// snapshot share, as generated code does.
func (s *PromptState) Read(from, to int) (Prompt, error) {
	return _Prompt_read(s.h, from, to)
}

// _Prompt_read reads rows of r, a head or a snapshot: it calls Len on r,
// which borrows it.
func _Prompt_read(r interface {
	Len() int
	Read(from, to int, dst [][]byte) error
}, from, to int) (Prompt, error) {
	if from < 0 || to < from || to > r.Len() {
		return Prompt{}, r.Read(from, to, nil)
	}
	rows := Prompt{Token: make([]int32, to-from), Hidden: make([]float32, to-from)}
	if err := r.Read(from, to, [][]byte{state.Bytes(rows.Token), state.Bytes(rows.Hidden)}); err != nil {
		return Prompt{}, err
	}
	return rows, nil
}
