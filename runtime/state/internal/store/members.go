package store

// members lists handles through links in the handles themselves
// (member), so that a handle joins and leaves a list with no allocation
// and in O(1): a lineage's live heads and snapshots (the lineage's lock
// guards them), and a shard's of the pool's live handles (liveShard).
type members[T any] struct {
	first *T
	link  func(*T) *member[T]
}

// member is a handle's place in a list of members.
type member[T any] struct {
	prev, next *T
	in         bool
}

// add lists x, which is not listed.
func (m *members[T]) add(x *T) {
	lx := m.link(x)
	lx.prev, lx.next, lx.in = nil, m.first, true
	if m.first != nil {
		m.link(m.first).prev = x
	}
	m.first = x
}

// remove unlists x; it does nothing when x is not listed.
func (m *members[T]) remove(x *T) {
	lx := m.link(x)
	if !lx.in {
		return
	}
	if lx.prev != nil {
		m.link(lx.prev).next = lx.next
	} else {
		m.first = lx.next
	}
	if lx.next != nil {
		m.link(lx.next).prev = lx.prev
	}
	*lx = member[T]{}
}
