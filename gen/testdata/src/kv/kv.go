// Package kv is a decoder's KV cache, the full contract: append growth,
// snapshots, fast-forward branches, rollback and checkpoints.
package kv

import "time"

//go:generate go run github.com/gpustate/gpustate/cmd/stategen

// MaxTokens is the context length.
const MaxTokens = 4 * 1024

// Half is an IEEE 754 half-precision float, stored as its bits.
type Half uint16

// KVCache holds one session's keys and values, one row per token.
//
//state:contract purpose="decoder KV cache for one session"
//state:growth append bound=MaxTokens
//state:owner session
//state:snapshot immutable
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:checkpoint every=64 keep=8
//state:cleanup on=session-end
type KVCache struct {
	Keys   []Half     `state:"width=128"`
	Values []Half     `state:"width=128"`
	Pos    [][2]int32 // the token's position and segment
	At     []time.Duration
}

// Log is an append-only event log with no bound, by decision.
//
//state:contract
//state:growth append bound=unbounded reason="drained by the exporter every second"
//state:owner process
//state:retention optional
//state:branch isolated merge=unsupported
//state:rollback descendants=keep
type Log struct {
	Events []uint64
}
