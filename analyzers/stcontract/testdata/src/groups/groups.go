// Package groups holds //state:group types: correct groups, silent, and
// one fault per group.
package groups

// KV is the attention cache of a session.
//
//state:contract
//state:growth append bound=64
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=invalidate
type KV struct{ Keys []float32 }

// Rec is the recurrent state of a session.
//
//state:contract
//state:growth mutable bound=4
//state:owner session
//state:branch isolated merge=fastforward
//state:rollback descendants=keep
type Rec struct{ H []float32 }

//state:contract
//state:growth mutable bound=4
//state:owner request
type Req struct{ H []float32 }

//state:contract
//state:growth mutable bound=4
//state:owner session
//state:retention optional
type Opt struct{ H []float32 }

type Plain struct{ X int }

// Decoder couples the two: silent. Members may differ in growth, branch
// and rollback rules; the group has what all of them have.
//
//state:group purpose="hybrid decoder state of one session"
//state:owner session
type Decoder struct {
	KV  KV
	Rec Rec
}

// Pair holds two states of one type: silent.
//
//state:group
//state:owner session
type Pair struct {
	Draft, Target KV
}

//state:group // want `group Alone has 1 member; a group couples at least two state types: add a field of another state type, or use the state type alone`
//state:owner session
type Alone struct{ KV KV }

//state:group // want `group NoOwner has no //state:owner line; add //state:owner KIND, the owner kind of its members`
type NoOwner struct {
	KV  KV
	Rec Rec
}

//state:group
//state:owner session
type Foreign struct {
	KV KV
	P  Plain // want `field P of group Foreign has type Plain, which is not a state type of this package; a member is a struct type with //state:contract declared beside the group`
}

//state:group
//state:owner session
type Pointer struct {
	KV  *KV // want `field KV of group Pointer has type \*KV; a member is a state type declared in this package \(write KV, not \*KV\)`
	Rec Rec
}

//state:group
//state:owner session
type Owners struct {
	KV KV
	R  Req // want `member R of group Owners is a state of owner kind request, and the group's owner kind is session; a group has one owner: write //state:owner session on both Req and group Owners`
}

//state:group
//state:owner session
type Retained struct {
	KV KV
	O  Opt // want `member O of group Retained has retention optional, and member KV has retention mandatory; members agree on retention, as an evicted member would leave its partner inconsistent`
}

//state:group
//state:owner session
//state:branch isolated merge=fastforward // want `//state:branch on group Lines: a group takes only //state:group and //state:owner, and each member keeps its own contract`
type Lines struct {
	KV  KV
	Rec Rec
}

//state:group
//state:owner session
type Nested struct {
	D  Decoder // want `field D of group Nested is group Decoder; groups do not nest`
	KV KV
}
