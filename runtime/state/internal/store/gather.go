package store

import "github.com/gpustate/gpustate/runtime/device"

// ReadRows copies the rows at indices idx, in that order, into dst: per
// column, len(idx) rows' bytes. Indices may repeat and come in any order
// (a sampled minibatch); each must be a readable row, else ErrRange, or
// ErrExpired below a window's floor, and dst is left unwritten. Runs of
// consecutive indices in one block come in one copy.
func (h *Head) ReadRows(idx []int, dst [][]byte) error {
	if h == nil {
		return errNil("Head", "ReadRows")
	}
	if err := h.begin("ReadRows"); err != nil {
		return err
	}
	defer h.end()
	return h.gather("ReadRows", h.r, idx, dst)
}

// ReadRows copies the snapshot's rows at indices idx into dst, as
// Head.ReadRows does.
func (s *Snap) ReadRows(idx []int, dst [][]byte) error {
	if s == nil {
		return errNil("Snap", "ReadRows")
	}
	if err := s.begin("ReadRows"); err != nil {
		return err
	}
	defer s.end()
	return s.gather("ReadRows", s.r, idx, dst)
}

// gather copies the rows of r at indices idx into dst.
func (sh *shape) gather(op string, r *root, idx []int, dst [][]byte) error {
	for _, i := range idx {
		if err := sh.checkReadable(op, i, i+1, r.rows); err != nil {
			return err
		}
	}
	if err := sh.checkDst(op, len(idx), dst); err != nil {
		return err
	}
	b := sh.pool.b
	for c, d := range dst {
		rb, per, bb := sh.rowBytes[c], sh.perBlock[c], sh.blockBytes[c]
		t := &r.cols[c]
		for k := 0; k < len(idx); {
			row := idx[k]
			bi := row / per
			// Extend the run while the next index is the next row, in
			// the same block or in the next one when it follows in
			// memory.
			n := 1
			first := t.get(bi)
			first.Touch() // its pages are mapped now (estimate.go)
			for last := first; k+n < len(idx) && idx[k+n] == row+n; n++ {
				if nb := (row + n) / per; nb != bi {
					next := t.get(nb)
					if per*rb != bb || !next.Follows(last) {
						break
					}
					next.Touch()
					bi, last = nb, next
				}
			}
			bi = row / per
			src := first.Ptr() + device.Ptr((row-bi*per)*rb)
			if err := b.CopyDtoH(d[k*rb:(k+n)*rb], src); err != nil {
				return sh.errorf(op, "column %s: %w", sh.l.Columns[c].Name, err)
			}
			k += n
		}
	}
	return nil
}
