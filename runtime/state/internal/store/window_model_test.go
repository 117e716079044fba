package store

import (
	"bytes"
	"errors"
)

// The reference's extension to window layouts and gather reads: the
// reference keeps every row ever appended, and expiry is a floor on what
// may be read.

// Floor returns the first row of x the store still answers: a window
// keeps its last Window rows.
func (x *RefHandle) Floor() int {
	if w := x.Lin.Layout.Window; w > 0 && x.Rows() > w {
		return x.Rows() - w
	}
	return 0
}

// checkWindow checks that a version holds no more than its window's blocks:
// per column, the blocks of Window rows plus one.
func (m *model) checkWindow(x *RefHandle, st Stats) {
	l := x.Lin.Layout
	if l.Window == 0 {
		return
	}
	var most int64
	for i, bb := range m.pool.columnBlockBytes(l) {
		per := bb / l.Columns[i].RowBytes()
		if l.BlockRows > 0 {
			per = min(per, l.BlockRows)
		}
		most += int64((l.Window+per-1)/per+1) * int64(bb)
	}
	if st.PhysicalBytes > most {
		m.fatalf("window of %d rows holds %d physical bytes, more than %d", l.Window, st.PhysicalBytes, most)
	}
}

// readRows gathers random rows of x, some of them expired or out of range.
func (m *model) readRows(x *RefHandle) {
	l := x.Lin.Layout
	rows := x.Rows()
	idx := make([]int, m.rng.IntN(12))
	want := x.StateErr()
	var wantIdx error
	for k := range idx {
		idx[k] = m.rng.IntN(rows+2) - 1
		switch {
		case idx[k] < 0 || idx[k] >= rows:
			wantIdx = cmpErr(wantIdx, ErrRange)
		case idx[k] < x.Floor():
			wantIdx = cmpErr(wantIdx, ErrExpired)
		}
	}
	want = cmpErr(want, wantIdx)
	dst := make([][]byte, len(l.Columns))
	for i, c := range l.Columns {
		dst[i] = make([]byte, len(idx)*c.RowBytes())
	}
	var err error
	if x.Head != nil {
		err = x.Head.ReadRows(idx, dst)
	} else {
		err = x.Snap.ReadRows(idx, dst)
	}
	if want == nil && faulted(err) {
		m.count(err)
		return
	}
	if want != nil && !errors.Is(err, want) {
		m.fatalf("ReadRows(%v) of %d rows (floor %d): %v, want %v", idx, rows, x.Floor(), err, want)
	}
	m.expect(err, want)
	if err != nil {
		return
	}
	for i, c := range l.Columns {
		rb := c.RowBytes()
		for k, row := range idx {
			if !bytes.Equal(dst[i][k*rb:(k+1)*rb], x.Cols[i][row*rb:(row+1)*rb]) {
				m.fatalf("ReadRows: row %d (index %d) of column %d differs", row, k, i)
			}
		}
	}
}
