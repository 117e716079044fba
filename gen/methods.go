package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/gpustate/gpustate/contract"
)

// A Method is one function or method stategen generates for a state type.
type Method struct {
	Name      string   // NewTState (newTState for an unexported T), or the method's name
	Recv      Recv     // what it is a method of
	Directive string   // the function directive statevet reads; "" for none
	When      string   // the contract line that makes it generated, "always" for none
	Doc       []string // the paragraphs of its doc comment
}

// Recv says what a generated function is a method of.
type Recv int

const (
	RecvFunc     Recv = iota // a function: the constructor
	RecvHead                 // a method of TState
	RecvSnapshot             // a method of TSnapshot
)

// Methods returns the functions and methods generated for contract c, in
// the order the file declares them: the constructor, the head's methods,
// then the snapshot's. The renderer writes exactly these, with these doc
// comments and directives; the report lists them.
func Methods(c *contract.Contract) []Method {
	var out []Method
	for _, s := range methodTable {
		if s.ok == nil || s.ok(c) {
			out = append(out, Method{Name: s.nameOf(c), Recv: s.recv, Directive: s.directive, When: s.when, Doc: s.doc(c)})
		}
	}
	return out
}

// A methodSpec is one row of the table: the Method, and how to render its
// signature and body once the Go types of the fields are known.
type methodSpec struct {
	name      string
	ctor      func(typ string) string // names a RecvFunc from the state type's name
	recv      Recv
	directive string
	when      string
	ok        func(c *contract.Contract) bool // nil: always
	doc       func(c *contract.Contract) []string
	code      func(m *model) *jen.Statement // from the name on
}

func (s methodSpec) nameOf(c *contract.Contract) string {
	if s.recv == RecvFunc {
		return s.ctor(c.Type)
	}
	return s.name
}

// What a contract allows.
func appends(c *contract.Contract) bool  { return c.Growth == contract.GrowthAppend }
func mutable(c *contract.Contract) bool  { return c.Growth == contract.GrowthMutable }
func snapshot(c *contract.Contract) bool { return c.Snapshot == contract.SnapshotImmutable }
func branch(c *contract.Contract) bool   { return c.Branch == contract.BranchIsolated }
func merge(c *contract.Contract) bool    { return branch(c) && c.Merge == contract.MergeFastforward }
func rollback(c *contract.Contract) bool { return snapshot(c) && c.Rollback }
func history(c *contract.Contract) bool  { return snapshot(c) && c.Checkpoint != nil }
func bounded(c *contract.Contract) bool  { return !c.Unbounded && c.Bound > 0 }
func window(c *contract.Contract) bool   { return c.Window > 0 }
func noWindow(c *contract.Contract) bool { return c.Window <= 0 }
func shared(c *contract.Contract) bool   { return c.ShareKey != "" }
func optional(c *contract.Contract) bool { return c.Retention == contract.RetentionOptional }

// para makes a one-paragraph doc from a fixed sentence.
func para(p string) func(*contract.Contract) []string {
	return func(*contract.Contract) []string { return []string{p} }
}

// methodTable lists every generated function and method, in file order.
var methodTable = []methodSpec{
	{recv: RecvFunc, ctor: ctorName, directive: "acquire", when: "always", doc: ctorDoc, code: (*model).ctorCode},
	{recv: RecvFunc, ctor: sharedCtorName, directive: "acquire", when: "a share line", ok: shared, doc: sharedCtorDoc, code: (*model).sharedCtorCode},
	{name: "Append", recv: RecvHead, directive: "appends", when: "growth append", ok: appends, doc: appendDoc, code: (*model).appendCode},
	{name: "AdoptPrefix", recv: RecvHead, directive: "appends", when: "a share line", ok: shared, doc: adoptDoc, code: (*model).adoptCode},
	{name: "Write", recv: RecvHead, directive: "mutates", when: "growth mutable", ok: mutable, doc: writeDoc, code: (*model).writeCode},
	{name: "Read", recv: RecvHead, when: "always", doc: readDoc("state"), code: (*model).headReadCode},
	{name: "ReadRows", recv: RecvHead, when: "always", doc: readRowsDoc("state"), code: readRowsCode(RecvHead)},
	{name: "ReadInto", recv: RecvHead, when: "always", doc: readIntoDoc("state"), code: readIntoCode(RecvHead)},
	{name: "ReadRowsInto", recv: RecvHead, when: "always", doc: readRowsIntoDoc("state"), code: readRowsIntoCode(RecvHead)},
	{name: "ReadFields", recv: RecvHead, when: "always", doc: readFieldsDoc("state"), code: readFieldsCode(RecvHead)},
	{name: "Len", recv: RecvHead, when: "always", doc: lenDoc, code: headCall("Len", jen.Int())},
	{name: "Bound", recv: RecvHead, when: "no window", ok: noWindow, doc: boundDoc, code: headCall("Bound", jen.Int())},
	{name: "Window", recv: RecvHead, when: "window=W", ok: window, doc: windowDoc, code: headCall("Window", jen.Int())},
	{name: "Oldest", recv: RecvHead, when: "window=W", ok: window, doc: oldestDoc("state"), code: headCall("Oldest", jen.Int())},
	{name: "Version", recv: RecvHead, when: "always", doc: para(
		"Version returns the state's current version. Every successful write makes a new version, larger than every version the state's lineage has seen."),
		code: headCall("Version", st("Version"))},
	{name: "Snapshot", recv: RecvHead, directive: "acquire", when: "snapshot immutable", ok: snapshot, doc: snapshotDoc, code: (*model).snapshotCode},
	{name: "Branch", recv: RecvHead, directive: "acquire", when: "branch isolated", ok: branch, doc: branchDoc, code: (*model).branchCode},
	{name: "Merge", recv: RecvHead, directive: "mutates", when: "merge=fastforward", ok: merge, doc: para(
		"Merge makes the state take child's content and version, as a fast-forward: the state must not have changed since child was branched from it, else Merge returns state.ErrDiverged and changes nothing. The child stays live and must still be released."),
		code: (*model).mergeCode},
	{name: "Rollback", recv: RecvHead, directive: "mutates", when: "a rollback line", ok: rollback, doc: rollbackDoc, code: (*model).rollbackCode},
	{name: "At", recv: RecvHead, directive: "acquire", when: "a checkpoint line", ok: history, doc: atDoc, code: (*model).atCode},
	{name: "VersionAt", recv: RecvHead, when: "growth append, a checkpoint line", ok: func(c *contract.Contract) bool { return appends(c) && history(c) }, doc: versionAtDoc,
		code: (*model).versionAtCode},
	{name: "Plan", recv: RecvHead, when: "a checkpoint line", ok: history, doc: para(
		"Plan explains how At would reconstruct version v: the checkpoint it would start from, the writes it would replay and the estimated cost. It reconstructs nothing."),
		code: (*model).planCode},
	{name: "Stats", recv: RecvHead, when: "always", doc: para(
		"Stats reports the state's version, rows, logical bytes (the rows it reads as) and physical bytes (the blocks it holds, shared ones included)."),
		code: headCall("Stats", st("Stats"))},
	{name: "AppendDevice", recv: RecvHead, directive: "appends", when: "growth append", ok: appends, doc: appendDeviceDoc, code: (*model).appendDeviceCode},
	{name: "AppendAsync", recv: RecvHead, directive: "appends", when: "growth append", ok: appends, doc: appendAsyncDoc, code: (*model).appendAsyncCode},
	{name: "WriteDevice", recv: RecvHead, directive: "mutates", when: "growth mutable", ok: mutable, doc: writeDeviceDoc, code: (*model).writeDeviceCode},
	{name: "Step", recv: RecvHead, directive: "mutates", when: "a replay line", ok: replayed, doc: stepDoc, code: (*model).stepCode},
	{name: "StepHost", recv: RecvHead, directive: "mutates", when: "a replay line", ok: replayed, doc: stepHostDoc, code: (*model).stepHostCode},
	{name: "Spans", recv: RecvHead, directive: "view", when: "always", doc: spansDoc, code: (*model).headSpansCode},
	{name: "ReadAsync", recv: RecvHead, when: "always", doc: readAsyncDoc("state"), code: readAsyncCode(RecvHead)},
	{name: "RecordStream", recv: RecvHead, when: "always", doc: para(
		"RecordStream says that work queued on st (a kernel, an async copy) uses the blocks the state holds now. When they are released, rolled back away or replaced by copy-on-write, the pool keeps them pending, neither reused nor zeroed for another owner, until an event recorded on st after that work completes; the caller never waits. It needs a backend with device.Streams. One that fails records nothing: wait for the work on st before the next call on the state, which could otherwise free or copy the blocks under it."),
		code: headStreamCall("RecordStream")},
	{name: "BlockTable", recv: RecvHead, directive: "acquire", when: "always", doc: blockTableDoc, code: headTableCall},
	{name: "Prefetch", recv: RecvHead, when: "retention optional", ok: optional, doc: para(
		"Prefetch brings the state back to device memory from the pool's host tier (state.PoolOptions.HostTier), where the pool may have moved it under memory pressure, before a call needs it. It returns nil for a state in device memory, state.ErrReleased for a released or nil one, and an error when device memory has no room for it, which leaves it in the tier; a state the pool dropped answers state.ErrEvicted."),
		code: headCall("Prefetch", jen.Error())},
	{name: "Release", recv: RecvHead, directive: "release", when: "always", doc: releaseDoc, code: headCall("Release", jen.Error())},

	{name: "Read", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: readDoc("snapshot"), code: (*model).snapReadCode},
	{name: "ReadRows", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: readRowsDoc("snapshot"), code: readRowsCode(RecvSnapshot)},
	{name: "ReadInto", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: readIntoDoc("snapshot"), code: readIntoCode(RecvSnapshot)},
	{name: "ReadRowsInto", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: readRowsIntoDoc("snapshot"), code: readRowsIntoCode(RecvSnapshot)},
	{name: "ReadFields", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: readFieldsDoc("snapshot"), code: readFieldsCode(RecvSnapshot)},
	{name: "Spans", recv: RecvSnapshot, directive: "view", when: "snapshot immutable", ok: snapshot, doc: para(
		"Spans locates rows [from, to) of the snapshot in device memory, for kernels that read them. They are read only, by contract: the blocks are shared with the state and its branches, and statevet reports a write through them."),
		code: (*model).snapSpansCode},
	{name: "ReadAsync", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: readAsyncDoc("snapshot"), code: readAsyncCode(RecvSnapshot)},
	{name: "RecordStream", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: para(
		"RecordStream says that work queued on st (a kernel, an async copy) uses the blocks the snapshot holds now. When they are released, rolled back away or replaced by copy-on-write, the pool keeps them pending, neither reused nor zeroed for another owner, until an event recorded on st after that work completes; the caller never waits. It needs a backend with device.Streams. One that fails records nothing: wait for the work on st before the next call on the snapshot, which could otherwise free the blocks under it."),
		code: snapStreamCall("RecordStream")},
	{name: "BlockTable", recv: RecvSnapshot, directive: "acquire", when: "snapshot immutable", ok: snapshot, doc: para(
		"BlockTable returns a device-resident table of the snapshot's blocks, per field (in field order), for kernels that read its rows in place. It never changes. Release it when done; releasing the snapshot releases it too."),
		code: snapTableCall},
	{name: "Len", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: para("Len returns the number of rows in the snapshot."),
		code: snapCall("Len", jen.Int())},
	{name: "Oldest", recv: RecvSnapshot, when: "snapshot immutable, window=W", ok: func(c *contract.Contract) bool { return snapshot(c) && window(c) },
		doc: oldestDoc("snapshot"), code: snapCall("Oldest", jen.Int())},
	{name: "Version", recv: RecvSnapshot, when: "snapshot immutable", ok: snapshot, doc: para("Version returns the version the snapshot holds."),
		code: snapCall("Version", st("Version"))},
	{name: "Release", recv: RecvSnapshot, directive: "release", when: "snapshot immutable", ok: snapshot, doc: para(
		"Release gives the snapshot's hold on its blocks back to the pool. Release is idempotent; every other method of a released snapshot returns state.ErrReleased."),
		code: snapCall("Release", jen.Error())},
}

// Doc comments that depend on the contract.

func ctorDoc(c *contract.Contract) []string {
	first := fmt.Sprintf("%s creates an empty %s state in pool p, owned by owner (%s).", ctorName(c.Type), c.Type, article(c.Owner))
	if mutable(c) {
		first = fmt.Sprintf("%s creates %s state of %d rows, all zero, in pool p, owned by owner (%s).", ctorName(c.Type), article(c.Type), c.Bound, article(c.Owner))
	}
	first += " The owner alone writes the state; its blocks are never shared with another owner's."
	return []string{first, releaseDuty("state")}
}

func sharedCtorDoc(c *contract.Contract) []string {
	return []string{
		fmt.Sprintf("%s creates an empty %s state in pool p, owned by owner (%s), in the sharing domain domain. Each full block the state appends is registered under its %s values and those of every block before it, so that a later state of the same domain takes it with AdoptPrefix instead of computing and storing its rows again. Blocks are shared only between the states of one non-empty domain (a tenant, a model, an adapter); the empty domain shares with nobody, and its states are those of %s. The owner alone writes the state; shared blocks are read only, by every holder.",
			sharedCtorName(c.Type), c.Type, article(c.Owner), c.ShareKey, ctorName(c.Type)),
		releaseDuty("state"),
	}
}

func adoptDoc(c *contract.Contract) []string {
	return []string{
		fmt.Sprintf("AdoptPrefix gives an empty state, in a new version, the longest chain of cached blocks of its domain whose %s values are the first values of keys, and returns the rows it adopted: a multiple of %s, at most len(keys)%s. The caller then computes and appends only the rest, the rows of keys[rows:].",
			c.ShareKey, blockRowsPhrase(c), boundNote(c)),
		fmt.Sprintf("The adopted rows are read only and stored once, whatever the number of states that hold them; the state's own appends go to blocks of its own after them. A state that is not empty answers state.ErrRange; one made by %s, or in the empty domain, adopts nothing and returns 0.", ctorName(c.Type)),
	}
}

// blockRowsPhrase names the rows of a block: those of a //state:block line,
// or the runtime's choice.
func blockRowsPhrase(c *contract.Contract) string {
	if c.BlockRows > 0 {
		return fmt.Sprintf("%d, the rows of a block", c.BlockRows)
	}
	return "the rows of a block (the runtime's choice, as the contract has no block line)"
}

// boundNote adds the bound to a count of rows, with a leading " and"; ""
// without one.
func boundNote(c *contract.Contract) string {
	if !bounded(c) {
		return ""
	}
	return fmt.Sprintf(" and the bound of %d", c.Bound)
}

func readDoc(what string) func(c *contract.Contract) []string {
	return func(c *contract.Contract) []string {
		return []string{fmt.Sprintf("Read copies rows [from, to) of the %s to the host, in a new %s. It returns state.ErrRange unless 0 <= from <= to <= Len().%s", what, c.Type, expiredNote(c))}
	}
}

// expiredNote says, for a window, which rows answer state.ErrExpired.
func expiredNote(c *contract.Contract) string {
	if !window(c) {
		return ""
	}
	return fmt.Sprintf(" Rows below Oldest() left the window of %d rows and answer state.ErrExpired.", c.Window)
}

func readRowsDoc(what string) func(c *contract.Contract) []string {
	return func(c *contract.Contract) []string {
		return []string{fmt.Sprintf("ReadRows copies the rows of the %s at indices idx, in that order, into a new %s: a gather of scattered rows, such as a sampled minibatch. Indices may repeat; each must lie in [0, Len()), else state.ErrRange.%s", what, c.Type, expiredNote(c))}
	}
}

func readIntoDoc(what string) func(c *contract.Contract) []string {
	return func(c *contract.Contract) []string {
		return []string{fmt.Sprintf("ReadInto copies rows [from, to) of the %s into dst, reslicing each field of dst to the rows read and reusing its capacity: a batch read again and again allocates nothing once its fields are large enough. It returns state.ErrRange unless 0 <= from <= to <= Len().%s A failed ReadInto leaves dst as it was.", what, expiredNote(c))}
	}
}

func readRowsIntoDoc(what string) func(c *contract.Contract) []string {
	return func(c *contract.Contract) []string {
		return []string{fmt.Sprintf("ReadRowsInto copies the rows of the %s at indices idx, in that order, into dst, as ReadRows does, reslicing each field of dst to len(idx) rows and reusing its capacity: a sampled minibatch gathered again and again allocates nothing once its fields are large enough. Indices may repeat; each must lie in [0, Len()), else state.ErrRange.%s A failed ReadRowsInto leaves dst as it was.", what, expiredNote(c))}
	}
}

func readFieldsDoc(what string) func(c *contract.Contract) []string {
	return func(c *contract.Contract) []string {
		return []string{fmt.Sprintf("ReadFields copies rows [from, to) of the %s into the fields of dst that are not nil, as ReadInto does, and reads nothing of the fields dst leaves nil: a read of one field copies none of the others. A field is read when it holds a slice that is not nil, even an empty one (make([]E, 0, n)); a reslice of a nil slice is nil. It returns state.ErrRange unless 0 <= from <= to <= Len().%s A failed ReadFields leaves dst as it was.", what, expiredNote(c))}
	}
}

func windowDoc(c *contract.Contract) []string {
	return []string{fmt.Sprintf("Window returns the rows the state keeps readable: the last %d. A window has no bound on Len; it bounds memory instead.", c.Window)}
}

func oldestDoc(what string) func(c *contract.Contract) []string {
	return func(c *contract.Contract) []string {
		return []string{fmt.Sprintf("Oldest returns the first row of the %s still readable: Len()-%d once more than %d rows were appended, else 0. Rows [Oldest(), Len()) are readable.", what, c.Window, c.Window)}
	}
}

func lenDoc(c *contract.Contract) []string {
	if mutable(c) {
		return []string{fmt.Sprintf("Len returns the number of rows the state holds: always %d.", c.Bound)}
	}
	if window(c) {
		return []string{"Len returns the number of rows ever appended: row indices stay stable, and rows [Oldest(), Len()) are readable."}
	}
	return []string{"Len returns the number of rows the state holds."}
}

// blockTableDoc documents the head's BlockTable; a window's table starts
// at its first block kept (TableColumn.First).
func blockTableDoc(c *contract.Contract) []string {
	at := "table[r / RowsPerBlock] + (r % RowsPerBlock) * RowBytes."
	if window(c) {
		at = "table[r / RowsPerBlock - First] + (r % RowsPerBlock) * RowBytes, First being the block of the table's first entry: expired blocks leave the table."
	}
	return []string{"BlockTable returns a device-resident table of the state's blocks, per field (in field order): the base address of each block, so that a kernel finds row r at " + at + " Writes, rollbacks and merges of the state keep it current. Release it when done; releasing the state releases it too."}
}

func boundDoc(c *contract.Contract) []string {
	switch {
	case mutable(c):
		return []string{fmt.Sprintf("Bound returns the number of rows the state has: %d.", c.Bound)}
	case !bounded(c):
		return []string{"Bound returns the most rows the state may hold: 0, as the contract sets no bound."}
	}
	return []string{fmt.Sprintf("Bound returns the most rows the state may hold: %d.", c.Bound)}
}

func snapshotDoc(c *contract.Contract) []string {
	p := "Snapshot returns the state's current version as an immutable snapshot, in O(1): no rows are copied. Later writes to the state or its branches never change what the snapshot reads, and it stays readable after the state is released"
	if rollback(c) && c.Descendants == contract.DescendantsInvalidate {
		p += ", until a Rollback abandons the line it belongs to (it then answers state.ErrInvalidated)"
	}
	return []string{p + ".", releaseDuty("snapshot")}
}

func branchDoc(c *contract.Contract) []string {
	p := "Branch returns a new head at the state's version and content, for the same owner. The branches are isolated: writes to one are invisible to the other and to every sibling, while the rows they share are stored once."
	if merge(c) {
		p += " A branch comes back by Merge, as a fast-forward."
	} else {
		p += " Branches are never merged back (merge=unsupported)."
	}
	return []string{p, releaseDuty("branch")}
}

func rollbackDoc(c *contract.Contract) []string {
	p := "Rollback moves the state back to the version of snapshot to, which must be an ancestor of the state's version (else state.ErrNotAncestor) taken by the same owner (else state.ErrOwner). Afterwards the state reads as to and has to's version."
	if c.Descendants == contract.DescendantsInvalidate {
		p += " Snapshots and branches taken from the abandoned line then answer state.ErrInvalidated (descendants=invalidate)."
	} else {
		p += " Snapshots and branches taken from the abandoned line stay readable (descendants=keep)."
	}
	return []string{p}
}

func atDoc(c *contract.Contract) []string {
	after := "plus the writes after it"
	if c.Replay != nil {
		after = "by running the steps after it again on their recorded inputs"
	}
	return []string{
		fmt.Sprintf("At reconstructs version v of the state's own history from the cheapest checkpoint %s (%s). It returns state.ErrNotRetained when the history no longer holds v.", after, checkpointShort(c.Checkpoint)),
		releaseDuty("snapshot"),
	}
}

func versionAtDoc(c *contract.Contract) []string {
	return []string{fmt.Sprintf("VersionAt returns the last version of the state's own history that held exactly n rows, so that a caller who knows how many rows it had (the tokens it accepted) needs no table of versions: At(v) rebuilds that version, and Rollback takes the snapshot At returns. It returns state.ErrRange unless 0 <= n <= Len(), and state.ErrNotRetained for a row count no retained version had: one inside an append's batch, or one older than the oldest checkpoint kept (%s).", checkpointShort(c.Checkpoint))}
}

func appendDeviceDoc(c *contract.Contract) []string {
	p := "AppendDevice appends n rows for a kernel to fill and returns where they live. The rows belong to a new version at once; the spans are the caller's to write until the next call on the state, in the order of the stream it is recorded on, if any (RecordStream): its own work on the rows is queued there."
	if bounded(c) {
		p += fmt.Sprintf(" It returns state.ErrBound, and appends nothing, when n rows would pass the bound of %d.", c.Bound)
	}
	if window(c) {
		p += fmt.Sprintf(" It returns state.ErrBound, and appends nothing, when n is more than the window of %d rows.", c.Window)
	}
	return []string{p}
}

func appendAsyncDoc(c *contract.Contract) []string {
	p := "AppendAsync appends the rows of a batch as Append does, in a new version, but queues their copies to the device on st and returns without waiting for them: the batch is staged in page-locked memory first, so the caller may reuse it at once. Work queued on st after the call sees the rows (a kernel, a ReadAsync); work on another stream must wait for an event recorded on st; every other call on the state waits for the copies to land first. It needs a backend with device.Streams (else an error wrapping errors.ErrUnsupported); a closed stream, or one of another backend, is an error."
	if bounded(c) {
		p += fmt.Sprintf(" It returns state.ErrBound, and appends nothing, when the rows would pass the bound of %d.", c.Bound)
	}
	if window(c) {
		p += fmt.Sprintf(" It returns state.ErrBound, and appends nothing, when the batch holds more than the window of %d rows.", c.Window)
	}
	return []string{p, "A failed AppendAsync changes nothing, so it may be retried."}
}

func readAsyncDoc(what string) func(c *contract.Contract) []string {
	return func(c *contract.Contract) []string {
		return []string{
			fmt.Sprintf("ReadAsync queues on st the copies of rows [from, to) of the %s into dst, reslicing each field of dst to the rows read and reusing its capacity as ReadInto does, and returns without waiting for them. It records the blocks it reads on st (RecordStream), so the %s may be released or written at once. dst holds the rows once the work queued on st so far has completed (st.Sync, or an event recorded on st after the call); until then its fields must be neither read nor changed. Fields in memory from the backend's HostAlloc make the copies truly asynchronous on CUDA. It needs a backend with device.Streams (else an error wrapping errors.ErrUnsupported). It returns state.ErrRange unless 0 <= from <= to <= Len().%s A failed ReadAsync leaves dst's fields as they were, though a copy it queued before the failure may still land in their arrays.", what, what, expiredNote(c)),
		}
	}
}

func writeDeviceDoc(c *contract.Contract) []string {
	return []string{fmt.Sprintf("WriteDevice hands out rows [from, to) for a kernel to write in place, in a new version. Blocks shared with snapshots or branches are copied first, so they never see the writes; the spans are the caller's to write until the next call on the state, in the order of the stream it is recorded on, if any (RecordStream): its own work on the rows is queued there. It returns state.ErrRange unless 0 <= from <= to <= %d.", c.Bound)}
}

func spansDoc(c *contract.Contract) []string {
	via := "AppendDevice"
	if mutable(c) {
		via = "WriteDevice"
	}
	return []string{fmt.Sprintf("Spans locates rows [from, to) in device memory, for kernels that read them. The blocks may be shared with snapshots and branches: write rows through %s, never through these spans.", via)}
}

func releaseDoc(c *contract.Contract) []string {
	p := "Release gives the state's blocks back to the pool"
	if snapshot(c) {
		p += "; snapshots taken from it stay readable"
	}
	p += ". Release is idempotent; every other method of a released state returns state.ErrReleased."
	if c.Cleanup != "" {
		p += fmt.Sprintf(" The contract names %s as the event on which the owner releases it.", c.Cleanup)
	}
	return []string{p}
}
