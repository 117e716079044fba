package store

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/gpustate/gpustate/runtime/device"
)

// Head is a mutable state: the head of a line of versions of one layout and
// one owner. Its methods are safe for concurrent use; one head serializes
// its writers.
type Head struct {
	shape
	id      uint64 // orders the locks of two heads
	gate    uint8  // the head's shard of the pool's gate (gate.go)
	lin     *lineage
	invalid atomic.Bool // set by a rollback that abandoned this head's line

	mu  sync.Mutex
	r   *root
	pos position // written with lin.mu held too
	// mine is the segment this head started, the one segment it may write
	// on without starting another (commitVersion); nil for a branch
	// until its first write.
	mine     *segment
	released bool
	evicted  bool // its blocks were taken under memory pressure
	lost     bool // evicted by a failed step's restore: rebuilt whatever its retention
	// tier is the head's version in the host tier (tier.go), where the
	// pool moved it instead of dropping it; the head is evicted meanwhile.
	tier *tierImage
	// deviceRows: the last call made rows a kernel writes (AppendDevice,
	// WriteDevice); the spans are the caller's until the next call, so a
	// group's cut and the host tier skip the head until then. An
	// AppendAsync's rows are its copies in flight (asyncPart.inflight).
	deviceRows bool
	parts      partSet // the parts the head has, in hook order (head.go)
	writeBufs          // what its writes reuse, from the pool's spares (write_bufs.go)
	logical    int64   // this head's share of the pool's LogicalBytes
	// writeFrom is the first row the change committing now makes (a
	// write's first row; the rows a rollback or merge keeps): the blocks
	// of the rows before it are the version before's, so a part that
	// keeps work per block (block tables, streams recorded) redoes only
	// those from there. 0 when the change may touch any row; setLogical
	// resets it.
	writeFrom int

	// The head's parts: its features that keep state of their own. The
	// head calls them through the hooks of part, in the order of the set
	// bits of parts, and names no feature otherwise (docs/INTERNALS.md,
	// "The store's map").
	lru    lruPart   // eviction and the use clock (evict.go)
	async  asyncPart // streams recorded and copies in flight (stream.go, async.go)
	tables tablePart // live block tables, kept current (blocktable.go)
	hist   *history  // checkpoints and deltas (checkpoint.go); nil without a policy
	share  *sharing  // the head's place in its prefix table (share.go); nil without a share key
	// shareMem is where share points when it is not nil, so that a branch
	// of a shared head is one allocation.
	shareMem sharing
	gshare   *groupShare // the shared member's registrations waiting for kernels (group_pending.go); nil elsewhere

	group atomic.Pointer[Group] // the group that holds it as a member (group.go); nil when none

	inLine member[Head] // its place in lin.heads
	inPool liveLink     // its place in the pool's live handles (Pool.register)
}

// part is a feature of a head with state of its own. Its hooks run with
// the head's lock held:
//
//   - prepare as a call starts, before it reads or writes (open, Merge
//     and the group calls share it: prepareLocked); an error fails the
//     call, which changes nothing;
//   - changed when the head's root is a new one (a write, a rollback, a
//     merge, an adoption, a rebuild);
//   - committed after a write made a new version;
//   - moved after the version changed other than by a write (Rollback,
//     Merge, a rebuild);
//   - branched when c is made a branch of h;
//   - release as the head is released, appending the blocks it frees to
//     freed and returning it (a slice, not a pointer to one, so that the
//     caller's list needs no allocation of its own).
//
// Release runs the parts in reverse order. lruPart, asyncPart and
// tablePart embed noHooks for the hooks they have no use for; history and
// sharing, declared with their records below the head, spell theirs out.
type part interface {
	prepare(h *Head, c call) error
	changed(h *Head)
	committed(h *Head, w written)
	moved(h *Head)
	branched(h, c *Head)
	release(h *Head, freed []*block) []*block
}

// partSet is a head's parts as bits, in hook order: the lowest bit's part
// runs first. Iterating over it allocates nothing, and a branch copies one
// byte rather than a list.
type partSet uint8

const (
	partLRU    partSet = 1 << iota // eviction and the use clock, always
	partAsync                      // once the head has streams or copies in flight
	partHist                       // with a checkpoint policy
	partShare                      // with a share key
	partGroup                      // the shared member of a group that shares prefixes
	partTables                     // once the head has a block table
)

// part returns the part of bit b of h's parts.
func (s partSet) part(h *Head, b partSet) part {
	switch b {
	case partLRU:
		return &h.lru
	case partAsync:
		return &h.async
	case partHist:
		return h.hist
	case partShare:
		return h.share
	case partGroup:
		return h.gshare
	default:
		return &h.tables
	}
}

// set lists h's parts in hook order: eviction, then the async part once
// it has state, history, sharing, and the block tables once h has one. It
// runs whenever history or sharing comes or goes; the async part and the
// tables join by setting their bit.
func (s *partSet) set(h *Head) {
	n := *s&(partAsync|partTables) | partLRU
	if h.hist != nil {
		n |= partHist
	}
	if h.share != nil {
		n |= partShare
	}
	if h.gshare != nil {
		n |= partGroup
	}
	*s = n
}

// The hooks of h's parts (see part), each run on every part of s in
// order; release in reverse order, forgetting them.

func (s partSet) prepare(h *Head, c call) error {
	for ; s != 0; s &= s - 1 {
		if err := s.part(h, s&-s).prepare(h, c); err != nil {
			return err
		}
	}
	return nil
}

func (s partSet) changed(h *Head) {
	for ; s != 0; s &= s - 1 {
		s.part(h, s&-s).changed(h)
	}
}

func (s partSet) committed(h *Head, w written) {
	for ; s != 0; s &= s - 1 {
		s.part(h, s&-s).committed(h, w)
	}
}

func (s partSet) moved(h *Head) {
	for ; s != 0; s &= s - 1 {
		s.part(h, s&-s).moved(h)
	}
}

func (s partSet) branched(h, c *Head) {
	for ; s != 0; s &= s - 1 {
		s.part(h, s&-s).branched(h, c)
	}
}

func (s *partSet) release(h *Head, freed []*block) []*block {
	for n := *s; n != 0; {
		b := partSet(1) << (7 - bits.LeadingZeros8(uint8(n)))
		n &^= b
		freed = s.part(h, b).release(h, freed)
	}
	*s = 0
	return freed
}

// noHooks is the hooks that do nothing.
type noHooks struct{}

func (noHooks) prepare(*Head, call) error                { return nil }
func (noHooks) committed(*Head, written)                 {}
func (noHooks) changed(*Head)                            {}
func (noHooks) moved(*Head)                              {}
func (noHooks) branched(_, _ *Head)                      {}
func (noHooks) release(_ *Head, freed []*block) []*block { return freed }

// call is what a call asks of prepare: its name for errors; land: wait
// for the copies of earlier AppendAsync calls; share: register the
// blocks that rows a kernel wrote filled.
type call struct {
	op          string
	land, share bool
	st          device.Stream // RecordStream's stream
}

// written is a version a write just committed: rows [from, to), whose
// bytes are final (host rows, adopted blocks) unless device (a kernel
// writes them after the call). An Append from the host sets host, and
// key to its rows of the share key's column, which sharing registers.
// It holds no slice of the caller's columns: the hooks run through the
// part interface, whose arguments the compiler takes to escape, and a
// batch's slice of columns, which every generated Append and Write
// builds, would then be allocated on every call.
type written struct {
	from, to int
	device   bool
	async    device.Stream // the device rows are an AppendAsync's, its copies queued on async already
	host     bool
	key      []byte
}

// kernel reports whether a kernel writes the rows after the call: a
// device write's, not an AppendAsync's, whose copies land at the next
// call (asyncPart.prepare).
func (w written) kernel() bool { return w.device && w.async == nil }

// lruPart is the head's place in eviction: the pool's use clock at its
// last call, and the rebuild of an evicted reconstructable head.
type lruPart struct {
	noHooks
	lastUse atomic.Uint64
}

// asyncPart is the device work a head's rows take part in: the streams
// recorded on it (RecordStream, or on the head it was branched from) and,
// per stream, the event after the copies of the last AppendAsync call on
// it not yet waited for. It joins the head's parts with its first state.
type asyncPart struct {
	noHooks
	streams  streamSet
	inflight []streamEvent
	marks    []streamMark // per stream RecordStream recorded on the head
	// kern is the rows the head handed to kernels and the events after
	// them, from its first device write on (behind a pointer: most heads
	// make none, and the head's record stays in its size class).
	kern *kernelRows
}

// kernelRows are the rows whose spans a head handed to kernels
// (AppendDevice, WriteDevice) since it last waited for them: a kernel may
// still be writing them (awaitKernel). The kernels of the last device
// write, of rows fresh, are queued by the next call, which records evs
// (per stream the kernels may be on, an event after them) and the
// streams on fresh's blocks.
type kernelRows struct {
	rows  rowRange
	fresh rowRange
	evs   []streamEvent // a *sharedEvent where a branch shares it
}

// rowRange is rows [from, to); empty when from == to.
type rowRange struct{ from, to int }

// add widens r to cover rows [from, to) too.
func (r *rowRange) add(from, to int) {
	switch {
	case from >= to:
	case r.from == r.to:
		r.from, r.to = from, to
	default:
		r.from, r.to = min(r.from, from), max(r.to, to)
	}
}

// overlaps reports whether r and rows [from, to) share a row.
func (r rowRange) overlaps(from, to int) bool { return r.from < to && from < r.to }

// streamMark says how far the head's blocks carry a stream: per column,
// the blocks below upTo[c] (from the column's first live one) were
// recorded on st and are still the head's.
type streamMark struct {
	st   device.Stream
	upTo []int
}

// streamEvent is an event recorded on a stream; tier marks the copies of
// a return from the host tier (tier_stream.go).
type streamEvent struct {
	st   device.Stream
	ev   device.Event
	tier bool
}

// tablePart is the head's live block tables, kept current with its root;
// it joins the head's parts with the first table.
type tablePart struct {
	noHooks
	list []*BlockTable
}

// A lineage is a head created by Pool.NewHead together with every branch,
// snapshot and merge that descends from it. Its versions form a tree; the
// lineage numbers them, so that every new version is larger than every
// version the lineage has seen.
//
// The version tree is kept in segments: a segment is a line of versions
// written one after another by one head. A new segment starts where a head
// writes after a branch, a merge or a rollback; it records its parent
// segment and the version it forked from. A position (segment, version)
// names a version, and the ancestry of a position is its own segment up to
// its version, then the parent segment up to the fork version, and so on.
// Memory therefore grows with the branches, merges and rollbacks on a line,
// not with its writes; and a rollback that abandons versions nothing else
// holds starts no segment (segment.held).
type lineage struct {
	id    uint64 // orders the locks of lineages a group call holds at once (group.go)
	mu    sync.Mutex
	owner Owner
	last  Version
	heads members[Head] // its live heads
	snaps members[Snap] // its live snapshots
	// root is the segment its first head starts on; spare, the rest of
	// the chunk its next segments come from, chunk segments long
	// (newSegment).
	root  segment
	spare []segment
	chunk int
	// steps counts the segments invalidate passed, for tests that count
	// work.
	steps int
}

// Snap is an immutable version of a state. Its content never changes,
// whatever happens later to its head, the head's branches or the pool; it
// stays readable after its head is released. It may be read from many
// goroutines at once.
//
//state:snapshot
type Snap struct {
	shape
	gate    uint8 // its head's shard of the pool's gate (gate.go)
	lin     *lineage
	r       *root
	pos     position
	invalid atomic.Bool
	logical int64

	mu       sync.RWMutex // read-held by reads, write-held by Release
	released bool
	evicted  bool          // its blocks were taken under memory pressure
	tier     *tierImage    // its version in the host tier, when evicted there (tier.go)
	lastUse  atomic.Uint64 // the pool's use clock at its last call

	tmu     sync.Mutex    // guards tables
	tables  []*BlockTable // freed with the snapshot
	streams streamSet     // streams recorded by RecordStream

	inLine member[Snap] // its place in lin.snaps
	inPool liveLink     // its place in the pool's live handles (Pool.register)
	// cut is the cut the snapshot is a member of (a group's:
	// Group.SnapshotInto, Group.At), set before the pool lists it.
	cut *snapCut
}

// snapCut is snapshots taken as one cut (a group's, GroupSnap): the
// eviction and the host tier take them together (cutVictims), and one
// that comes back from the tier brings the others (Snap.back).
type snapCut struct {
	snaps []*Snap
	// whole is set once every snapshot is taken: until then the eviction
	// and the tier leave the cut alone, and snaps is its builder's.
	whole atomic.Bool
	owner Owner
	typ   string // what the Evictor sees as its type
}

func headLink(h *Head) *member[Head] { return &h.inLine }
func snapLink(s *Snap) *member[Snap] { return &s.inLine }

// streamSet is the streams recorded on one handle, for the frees of its
// block tables.
type streamSet struct {
	mu   sync.Mutex
	list []device.Stream
}

// empty reports whether no stream was recorded.
func (ss *streamSet) empty() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.list) == 0
}

func (ss *streamSet) add(st device.Stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !hasStream(ss.list, st) {
		ss.list = append(ss.list, st)
	}
}

// has reports whether st was recorded.
func (ss *streamSet) has(st device.Stream) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return hasStream(ss.list, st)
}

func (ss *streamSet) get() []device.Stream {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return append([]device.Stream(nil), ss.list...)
}

// BlockTable is a device-resident table of a head's or snapshot's blocks,
// per column: an array of the blocks' base addresses (little-endian u64,
// one per block, in row order), so that a kernel finds logical row r of a
// column at table[r / RowsPerBlock] + (r % RowsPerBlock) * RowBytes with no
// host round trip (the block tables of paged attention); for a window
// state, at table[r / RowsPerBlock - First] (TableColumn). A snapshot's table
// never changes. A head's follows the head's writes, rollbacks and merges,
// in stream order (docs/INTERNALS.md): entries are only ever added in
// place past those any earlier version had; a change to an entry an
// earlier version had moves the column to a new allocation, so a kernel
// queued with the table of an earlier version (the Ptr Column gave then)
// still reads that version's blocks, and the old allocation is freed once
// the streams recorded on the head are done with it. Take Ptr from Column
// for each launch. When the device fails to bring the table up to date,
// Column reports it until a later call on the head, or Column itself,
// rebuilds it. When the head is evicted or moved to the host tier, its
// blocks are freed: Column rebuilds it or brings it back first, and
// answers the error (ErrEvicted for a head the pool dropped) when it
// cannot. Release it when done; releasing its head or snapshot releases
// it too.
type BlockTable struct {
	pool *Pool
	// streams returns the streams recorded on the table's handle: frees of
	// table memory wait for them as block frees do.
	streams func() []device.Stream
	// refresh brings a head's table up to date with the head after a
	// failure; nil for a snapshot's.
	refresh func()

	mu       sync.Mutex
	cols     []tableCol
	err      error // the last failure to bring the table up to date; nil once rebuilt
	released bool
	buf      []byte // reused for the entries a sync writes in place
}

type tableCol struct {
	ptr      device.Ptr // nil until the column has a block
	capacity int        // entries the allocation at ptr holds
	first    int        // the block of the allocation's first entry
	n        int        // blocks of the version the table stands for
	// dev is what the allocation at ptr holds, from block first up to the
	// most blocks any version had in it: kernels queued at those versions
	// may read them.
	dev      []uint64
	perBlock int
	rowBytes int
}

// Coupled state (docs/GUIDE.md, "Coupled state"): a Group holds heads of
// one owner that move together, such as a hybrid decoder's KV cache and
// recurrent state. Each member keeps its own layout and rules; the group
// makes the calls that move heads atomic over all of them:
//
//   - Snapshot is a consistent cut: the group holds every member's lock
//     while it takes the members' snapshots, so no member write falls
//     between two of them.
//   - Rollback and Merge check every member first (ancestry, owner,
//     invalidation, eviction, divergence), with every member's lock and
//     every lineage's lock held, and then move all members, or none.
//   - NewGroup, Branch and Snapshot that fail part-way give back what they
//     took. A failed group call changes nothing.
//
// A member head stays a head: its writes, reads, spans, snapshots and
// branches are its own (a member's own snapshot or branch is an ordinary
// uncoupled handle), and it counts as a live handle of the pool. Rollback,
// Merge and Release on a member answer an error wrapping ErrCoupled and
// change nothing: they are the group's.
//
// Lock order: the group's mu (two groups: by id), the pool's gate, the
// members' mu (by head id), the rollback targets' mu, the lineages' mu (by
// lineage id). Nothing else holds two lineage locks at once.
type Group struct {
	id    uint64
	pool  *Pool
	gate  uint8 // the group's shard of the pool's gate (gate.go)
	owner Owner
	heads []*Head // the members, in declaration order
	order []*Head // the members by id: the order of their locks
	// shared is the index of the first member whose layout has a
	// ShareKey, -1 when none; domain and key, set by NewSharedGroup,
	// find the group's table of registered states (group_share.go).
	shared int
	domain Domain
	key    groupKey
	// tip is the entry of the group's table last registered or adopted:
	// where the next registration's chain is looked for first. Its
	// holder's members may have moved since; a registration checks it.
	// The shared member's mu guards it.
	tip *groupEntry
	// victimType names the group for the Evictor: its members' types.
	victimType string

	mu       sync.Mutex // serializes the group's calls
	released bool
}
