package a

import (
	"res"
	"slices"
	"sort"
	"wr"
)

func writes(s *res.State) {
	v, err := s.Snapshot()
	if err != nil {
		return
	}
	defer v.Release()
	rows := v.Rows()
	rows[0] = 1  // want `write through a view of snapshot Snap, which is immutable; write to the state head \(or a branch of it\), or copy the rows first`
	rows[1]++    // want `write through a view of snapshot Snap`
	rows[2] += 3 // want `write through a view of snapshot Snap`
	tail := rows[2:]
	tail[0] = 4             // want `write through a view of snapshot Snap`
	copy(rows, []int{1, 2}) // want `write through a view of snapshot Snap`
	_ = append(rows[:1], 9) // want `write through a view of snapshot Snap`
	clear(tail)             // want `write through a view of snapshot Snap`
	v.Rows()[0] = 5         // want `write through a view of snapshot Snap`
	wr.Fill(rows)           // want `write through a view of snapshot Snap`
	wr.FillAll(nil, rows)   // want `write through a view of snapshot Snap`
	wr.Bump(tail)           // want `write through a view of snapshot Snap`
	slices.Sort(rows)       // want `write through a view of snapshot Snap`
	sort.Ints(rows)         // want `write through a view of snapshot Snap`
	v.Poke()                // want `Poke mutates its receiver, but Snap is an immutable snapshot; call it on the state head \(or a branch of it\)`
	p := &rows[0]
	*p = 7 // want `write through a view of snapshot Snap`
}

func spans(v *res.Snap, out []res.Span) {
	sp, err := v.Spans()
	if err != nil {
		return
	}
	keys := sp.Keys
	keys[0].Rows = 3           // want `write through a view of snapshot Snap`
	res.Launch(sp.Values, out) // want `write through a view of snapshot Snap`
	res.Launch(out, sp.Values) // reading the snapshot's spans is fine
	for _, k := range sp.Keys {
		res.Launch([]res.Span{k}, nil)
		k.Rows = 0 // a copy
	}
}

func phi(v *res.Snap, s *res.State, fromSnap bool) {
	var rows []int
	if fromSnap {
		rows = v.Rows()
	} else {
		rows = s.Rows()
	}
	rows[0] = 1 // want `write through a view of snapshot Snap`
}

// ---- no findings ----

func reads(v *res.Snap, dst []int) int {
	rows := v.Rows()
	copy(dst, rows)
	x := rows[0]
	x++
	n := wr.Sum(rows)
	_ = append(rows, 1)
	_ = slices.Contains(rows, 3)
	_ = slices.Index(rows, 3)
	return n + x + v.Len()
}

func head(s *res.State) {
	rows := s.Rows()
	rows[0] = 1
	slices.Sort(rows)
}

func decode(dst *res.Span) { dst.Rows = 0 }

func copies(v *res.Snap) {
	sp, err := v.Spans()
	if err != nil {
		return
	}
	k := sp.Keys[0]
	decode(&k)          // a copy of a span
	decode(&sp.Keys[0]) // want `write through a view of snapshot Snap`
	rows := v.Rows()
	_ = append(rows[:0:0], 1)  // a full slice expression: append copies
	_ = append(rows[1:2:2], 1) // the same
}

func reassigned(v *res.Snap) {
	rows := v.Rows()
	_ = rows[0]
	rows = make([]int, 4)
	rows[0] = 1
	copied := slices.Clone(v.Rows())
	copied[0] = 2
}
