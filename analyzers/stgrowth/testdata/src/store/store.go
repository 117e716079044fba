// Package store declares the appends method that package user calls in a
// loop: the directive crosses the package boundary as a fact.
package store

// KVCacheState is a handle like the ones stategen writes.
type KVCacheState struct{ rows int }

// Append appends rows.
//
//state:appends
func (s *KVCacheState) Append(rows []float32) error { s.rows += len(rows); return nil }

// AppendDevice reserves n rows for a kernel to fill.
//
//state:appends
func (s *KVCacheState) AppendDevice(n int) ([]uintptr, error) { return nil, nil }

// Len is the number of rows.
func (s *KVCacheState) Len() int { return s.rows }
