// Package share holds prefix sharing lines: one fault per contract, and a
// correct contract with no finding.
package share

const MaxTokens = 4096

type Token uint32

// Prompt caches the keys and values of a prompt, shared across the
// sessions of one domain by the tokens in it: silent.
//
//state:contract
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix key=Toks
type Prompt struct {
	Toks   []Token
	Keys   []float32 `state:"width=64"`
	Values []float32 `state:"width=64"`
}

//state:contract
//state:growth append bound=MaxTokens
//state:owner session
//state:share suffix key=Toks // want `bad value "suffix" for //state:share of Mode; use prefix`
type Mode struct{ Toks []Token }

//state:contract
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix // want `//state:share of NoKey needs key=FIELD, the integer field whose values identify a prefix`
type NoKey struct{ Toks []Token }

//state:contract
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix key=Tok // want `share key "Tok" of Typo names no field of Typo; did you mean Toks\?`
type Typo struct {
	Toks []Token
	Keys []float32
}

//state:contract
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix key=Keys // want `share key Keys of Float has element type float32; a key is a sized integer`
type Float struct {
	Toks []Token
	Keys []float32
}

//state:contract
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix key=Toks // want `share key Toks of Wide has width 2; a key is one value per row`
type Wide struct {
	Toks []Token `state:"width=2"`
}

//state:contract
//state:growth mutable bound=MaxTokens
//state:owner session
//state:share prefix key=Toks // want `//state:share of Mutable needs append growth: shared blocks are read only`
type Mutable struct{ Toks []Token }

//state:contract
//state:growth append window=MaxTokens
//state:owner session
//state:share prefix key=Toks // want `//state:share of Window cannot share the prefix of a window`
type Window struct{ Toks []Token }

//state:contract
//state:growth append bound=MaxTokens
//state:owner session
//state:share prefix key=Toks
//state:share prefix key=Toks // want `repeated //state:share in the contract of Twice \(first at line 75\); keep one`
type Twice struct{ Toks []Token }
