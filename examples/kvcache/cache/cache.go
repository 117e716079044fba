// Package cache is the KV cache of a small decoder: per token, the keys and
// values of every layer and the token itself, and an evictable cache of a
// shared prompt prefix. Their handles (kvcache_state.go,
// promptcache_state.go) are generated from the contracts below.
package cache

//go:generate go run github.com/gpustate/gpustate/cmd/stategen -report CONTRACTS.md

const (
	// Layers is the decoder's depth.
	Layers = 4
	// Dim is the width of one layer's key and value vectors.
	Dim = 64
	// MaxTokens is the context length: the cache's bound.
	MaxTokens = 512
)

// KVCache is one session's decoder cache, one row per token: Keys and Values
// hold Layers vectors of Dim floats each, Token the token id. A token's keys
// and values depend only on the tokens up to it, so sessions of one tenant
// share the rows of a common prefix, such as a system prompt: full blocks
// are matched by their Token values and those of every block before them.
//
//state:contract purpose="decoder KV cache for one session"
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix key=Token
//state:snapshot immutable
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:cleanup on=session-end
type KVCache struct {
	Keys   []float32 `state:"width=256"` // Layers*Dim
	Values []float32 `state:"width=256"`
	Token  []int32
}

// PromptCache keeps the KV rows of a prompt prefix that sessions share, for
// as long as memory allows: the prefill can recompute them, so the pool may
// evict it to make room for a session's KVCache.
//
//state:contract purpose="shared prompt-prefix cache, recomputable by prefill"
//state:growth append bound=MaxTokens
//state:owner session
//state:snapshot none
//state:retention optional
//state:cleanup on=session-end
type PromptCache struct {
	Keys   []float32 `state:"width=256"` // Layers*Dim
	Values []float32 `state:"width=256"`
	Token  []int32
}
