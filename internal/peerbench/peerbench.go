// Package peerbench measures the store against what a Go engineer writes
// by hand for the same serving workloads (docs/BENCHMARKS.md, "Against a
// hand-written peer"). Its state types are a serving engine's: a KV cache
// of 2052-byte rows (256 keys, 256 values and a token) whose sessions
// share a prompt prefix, and a 16 KiB recurrent state beside it, written
// in place or replayed through Step. The handles (ctx_state.go, ...) are
// generated from the contracts below; the workloads and their peers are
// in the package's tests.
package peerbench

//go:generate go run github.com/gpustate/gpustate/cmd/stategen

const (
	// Tokens is a session's context bound.
	Tokens = 2048
	// Dim is the width of a row's keys and of its values.
	Dim = 256
	// RecRows and RecDim shape the recurrent state: RecRows rows of
	// RecDim floats, 16 KiB.
	RecRows = 4
	RecDim  = 1024
	// InDim is the width of a recurrent step's input, per row.
	InDim = 64
	// Window is the KV rows a windowed session keeps readable: older rows
	// expire.
	Window = 512
)

// Ctx is one session's KV cache, one row per token. Sessions of one
// tenant share the rows of a common prompt.
//
//state:contract purpose="KV cache of one serving session"
//state:growth append bound=Tokens
//state:owner session
//state:share prefix key=Token
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:cleanup on=session-end
type Ctx struct {
	Keys   []float32 `state:"width=256"` // Dim
	Values []float32 `state:"width=256"`
	Token  []int32
}

// Rec is a session's recurrent state, rewritten after every token.
//
//state:contract purpose="recurrent state of one serving session"
//state:growth mutable bound=RecRows
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:cleanup on=session-end
type Rec struct {
	H []float32 `state:"width=1024"` // RecDim
}

// RecR is Rec whose history is its steps' inputs: a past version is
// rebuilt from a checkpoint by running the steps again.
//
//state:contract purpose="replayed recurrent state of one serving session"
//state:growth mutable bound=RecRows
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:checkpoint every=16 keep=4
//state:replay input=RecIn
//state:cleanup on=session-end
type RecR struct {
	H []float32 `state:"width=1024"` // RecDim
}

// RecIn is the input of one recurrent step, one row per state row.
type RecIn struct {
	X []float32 `state:"width=64"` // InDim
}

// CtxW is Ctx with a window: a session's last Window rows stay readable,
// and the blocks of older ones go back to the pool.
//
//state:contract purpose="windowed KV cache of one serving session"
//state:growth append window=Window
//state:owner session
//state:cleanup on=session-end
type CtxW struct {
	Keys   []float32 `state:"width=256"` // Dim
	Values []float32 `state:"width=256"`
	Token  []int32
}

// RecC is Rec with a history: At rebuilds a past version from a
// checkpoint and the write sets after it.
//
//state:contract purpose="checkpointed recurrent state of one serving session"
//state:growth mutable bound=RecRows
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
//state:checkpoint every=16 keep=4
//state:cleanup on=session-end
type RecC struct {
	H []float32 `state:"width=1024"` // RecDim
}

// Hybrid is a session's KV cache and recurrent state, which move together.
//
//state:group purpose="hybrid serving session"
//state:owner session
type Hybrid struct {
	KV  Ctx
	Rec Rec
}

// HybridR is Hybrid with the replayed recurrent state.
//
//state:group purpose="hybrid serving session, replayed"
//state:owner session
type HybridR struct {
	KV  Ctx
	Rec RecR
}

// Windowed is a session's windowed KV cache and checkpointed recurrent
// state, which move together.
//
//state:group purpose="windowed hybrid serving session"
//state:owner session
type Windowed struct {
	KV  CtxW
	Rec RecC
}

// WindowedR is Windowed with the replayed recurrent state.
//
//state:group purpose="windowed hybrid serving session, replayed"
//state:owner session
type WindowedR struct {
	KV  CtxW
	Rec RecR
}
