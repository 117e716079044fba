// Package prefix holds a prompt cache whose full blocks are shared across
// the sessions of one domain, keyed by the prompt's tokens, and a cache of
// the same shape that shares nothing.
package prefix

const maxTokens = 8192

// Token is a token id.
type Token uint32

// Prompt is the attention cache of one prompt.
//
//state:contract purpose="prompt keys and values, shared by prefix"
//state:growth append bound=maxTokens
//state:owner session
//state:retention optional
//state:branch isolated merge=unsupported
//state:block rows=16
//state:share prefix key=Toks
type Prompt struct {
	Toks   []Token
	Keys   []float32 `state:"width=64"`
	Values []float32 `state:"width=64"`
}

// Private is Prompt without a share line: it gets neither
// NewPrivateStateShared nor AdoptPrefix.
//
//state:contract
//state:growth append bound=maxTokens
//state:owner session
type Private struct {
	Toks []Token
	Keys []float32 `state:"width=64"`
}
