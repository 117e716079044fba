// Package decoder is the state of a small hybrid decoder, the shape of
// Jamba, Nemotron-H or Qwen3-Next: attention layers that keep a KV cache
// beside recurrent layers that keep a fixed-size state. The two move
// together, so they are one group: speculative decoding rolls both back,
// beam search branches both. Their handles (kvcache_state.go,
// recurrent_state.go, decoder_state.go) are generated from the contracts
// below.
package decoder

//go:generate go run github.com/gpustate/gpustate/cmd/stategen

const (
	// Dim is the width of the model: of a token's hidden vector, and of
	// one layer's keys, values and recurrent state.
	Dim = 16
	// AttnLayers is the number of attention layers, RecLayers that of
	// recurrent layers; they alternate, a recurrent layer first.
	AttnLayers = 2
	RecLayers  = 2
	// MaxTokens is the context length: the KV cache's bound.
	MaxTokens = 256
)

// KVCache is the attention layers' cache, one row per token: the keys and
// values of every attention layer, and the token. Sessions of one tenant
// share the rows of a common prefix, such as a system prompt: full blocks
// are matched by their Token values and those of every block before them,
// and the group restores the recurrent state at the same prefix.
//
//state:contract purpose="attention KV cache of one session"
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix key=Token
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:cleanup on=session-end
type KVCache struct {
	Keys   []float32 `state:"width=32"` // AttnLayers*Dim
	Values []float32 `state:"width=32"`
	Token  []int32
}

// Recurrent is the recurrent layers' state: one row per layer, the layer's
// gated linear recurrence h, rewritten in place after every token by Step.
// Its history is the steps' inputs, not the rows they wrote: a past version
// is rebuilt from a checkpoint by running the steps again.
//
//state:contract purpose="recurrent layers' state of one session"
//state:growth mutable bound=RecLayers
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:checkpoint every=16 keep=4
//state:replay input=RecInput verify=hash
//state:cleanup on=session-end
type Recurrent struct {
	H []float32 `state:"width=16"` // Dim
}

// RecInput is the input of one recurrent step: the vector each recurrent
// layer reads, one row per layer. A layer after the first reads what the
// attention layers before it made of the cached rows, so the token alone
// does not determine the step; its inputs do. (In this small model an
// input is as large as the state; a real state-space layer's state is
// many times its input.)
type RecInput struct {
	X []float32 `state:"width=16"` // Dim
}

// Decoder is one session's state: the KV cache and the recurrent state,
// which a rollback, a branch or a merge must move together.
//
//state:group purpose="hybrid decoder state of one session"
//state:owner session
type Decoder struct {
	KV  KVCache
	Rec Recurrent
}
