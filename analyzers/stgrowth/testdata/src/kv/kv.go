// Package kv declares the appends methods of a state with declared prefix
// sharing that package share calls in a loop: the directives cross the
// package boundary as facts.
package kv

// PromptState is a handle like the ones stategen writes for a state with
// //state:share prefix key=Token.
type PromptState struct{ rows int }

// AdoptPrefix takes the longest chain of cached blocks whose Token values
// match keys and returns the rows it adopted.
//
//state:appends
func (s *PromptState) AdoptPrefix(keys []int32) (int, error) { return 0, nil }

// Append appends rows.
//
//state:appends
func (s *PromptState) Append(token []int32) error { s.rows += len(token); return nil }

// Release gives the state's blocks back.
//
//state:release
func (s *PromptState) Release() error { return nil }
