// Package hybrid holds groups: a hybrid decoder's KV cache and recurrent
// state, and a pair whose members allow fewer calls.
package hybrid

// Token is a token id.
type Token uint32

// KVCache is the attention cache of one session.
//
//state:contract
//state:growth append bound=1024
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:share prefix key=Toks
type KVCache struct {
	Toks   []Token
	Keys   []float32 `state:"width=16"`
	Values []float32 `state:"width=16"`
}

// Recurrent is the recurrent layers' state of one session.
//
//state:contract
//state:growth mutable bound=4
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=keep
type Recurrent struct {
	H []float32 `state:"width=16"`
}

// Log is a session's event log: no branches.
//
//state:contract
//state:growth append bound=256
//state:owner session
//state:rollback descendants=keep
type Log struct {
	Events []uint64
}

// Decoder is one session's state in a hybrid decoder.
//
//state:group purpose="hybrid decoder state of one session"
//state:owner session
type Decoder struct {
	KV  KVCache
	Rec Recurrent
}

// Traced couples a recurrent state with a log, which has no branches:
// the group has no Branch nor Merge.
//
//state:group
//state:owner session
type Traced struct {
	Rec Recurrent
	Log Log
}
