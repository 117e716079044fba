package contract

import (
	"math"
	"strings"
)

// growth parses //state:growth append|mutable bound=B [reason="..."].
func (cp *contractParse) growth(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "bound", "reason", "window")
	law := cp.enumWord(d, words, "a growth law", "append", "mutable")
	switch law {
	case "append":
		cp.c.Growth = GrowthAppend
	case "mutable":
		cp.c.Growth = GrowthMutable
	default:
		return
	}
	if w, ok := kv["window"]; ok {
		cp.window(law, kv, w)
		return
	}
	bound, hasBound := kv["bound"]
	reason, hasReason := kv["reason"]
	unbounded := hasBound && bound.value == "unbounded" && !bound.quoted
	switch {
	case !hasBound && cp.misspelt["bound"]:
	case !hasBound && law == "append":
		cp.growthf(d.pos, d.end,
			"append growth of %s has no bound; add bound=N (the most rows it may hold) or bound=unbounded reason=\"...\" to grow without limit", name)
	case !hasBound:
		cp.errorf(d.pos, d.end, "mutable growth of %s needs bound=N: a mutable state has exactly N rows", name)
	case unbounded && law == "mutable":
		cp.errorf(bound.valPos, bound.end, "mutable growth of %s cannot be unbounded: a mutable state has exactly N rows; write bound=N", name)
	case unbounded:
		cp.c.Unbounded = true
		if !hasReason || strings.TrimSpace(reason.value) == "" {
			cp.growthf(d.pos, d.end,
				"bound=unbounded on %s has no reason; add reason=\"...\" saying why it may grow without limit, or give bound=N", name)
		} else {
			cp.c.UnboundedReason = reason.value
		}
	default:
		cp.rows(bound)
	}
	if hasReason && hasBound && !unbounded {
		cp.errorf(reason.pos, reason.end, "reason applies only to bound=unbounded in the growth of %s; remove it", name)
	}
	if hasReason && !hasBound && law == "append" {
		cp.errorf(reason.pos, reason.end, "reason without bound=unbounded in the growth of %s; write bound=unbounded reason=\"...\" or bound=N", name)
	}
}

// window parses the window=W of a growth line: append growth only, and
// never with bound=, since a window is itself the bound on memory (rows
// are appended without a limit on their count, only the last W stay).
func (cp *contractParse) window(law string, kv map[string]arg, w arg) {
	name := cp.name
	if law == "mutable" {
		cp.errorf(w.pos, w.end, "window applies only to append growth, and %s is mutable (exactly N rows, written in place); remove window= or write //state:growth append window=W", name)
		return
	}
	if b, ok := kv["bound"]; ok {
		cp.errorf(b.pos, b.end, "growth of %s has both bound= and window=; a window already bounds memory (rows are appended without a limit on their count and only the last W stay readable): keep one of them", name)
		return
	}
	if r, ok := kv["reason"]; ok {
		cp.errorf(r.pos, r.end, "reason applies only to bound=unbounded, and the window of %s already bounds it; remove reason", name)
		return
	}
	v, msg := cp.p.constInt(w.value, w.valPos)
	switch {
	case msg != "":
		cp.errorf(w.valPos, w.end, "window %s of %s %s; write a positive integer constant (4096, MaxRows, 4*K, pkg.MaxRows)", quote(w.value), name, msg)
	case v <= 0:
		cp.errorf(w.valPos, w.end, "window %s of %s is %d; a window must be a positive number of rows", quote(w.value), name, v)
	default:
		cp.c.Window = v
		cp.bound = &w
	}
}

// block parses //state:block rows=N: rows per block, a positive integer
// constant.
func (cp *contractParse) block(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "rows")
	cp.noWords(d, words, "rows=N")
	a, ok := kv["rows"]
	if !ok {
		if !cp.misspelt["rows"] {
			cp.errorf(d.pos, d.end, "//state:block of %s needs rows=N, the rows each block holds (e.g. //state:block rows=16)", name)
		}
		return
	}
	v, msg := cp.p.constInt(a.value, a.valPos)
	switch {
	case msg != "":
		cp.errorf(a.valPos, a.end, "block rows %s of %s %s; write a positive integer constant (16, RowsPerBlock, 4*K)", quote(a.value), name, msg)
	case v <= 0 || v > maxBlockRows:
		cp.errorf(a.valPos, a.end, "block rows %s of %s is %d; rows per block must be between 1 and %d", quote(a.value), name, v, maxBlockRows)
	default:
		cp.c.BlockRows = int(v)
	}
}

// maxBlockRows caps //state:block rows=N: a block of more rows than this
// is no block but a slab.
const maxBlockRows = 1 << 24

// rows evaluates bound=N, N a positive integer constant.
func (cp *contractParse) rows(bound arg) {
	v, msg := cp.p.constInt(bound.value, bound.valPos)
	switch {
	case msg != "":
		cp.errorf(bound.valPos, bound.end, "bound %s of %s %s; write a positive integer constant (4096, MaxRows, 4*K, pkg.MaxRows) or unbounded", quote(bound.value), cp.name, msg)
	case v <= 0:
		cp.errorf(bound.valPos, bound.end, "bound %s of %s is %d; a bound must be a positive number of rows", quote(bound.value), cp.name, v)
	default:
		cp.c.Bound = v
		cp.bound = &bound
	}
}

// sizeCheck reports a bound whose rows cannot exist: bound times the bytes
// of a row overflows int64, or exceeds maxStateBytes.
func (cp *contractParse) sizeCheck() {
	c, b := cp.c, cp.bound
	rows := c.Bound
	if c.Window > 0 {
		rows = c.Window
	}
	if b == nil || rows <= 0 || len(c.Fields) == 0 {
		return
	}
	var row int64 // at most maxRowBytes per field: no overflow below 1<<23 fields
	for _, f := range c.Fields {
		row += f.RowBytes
	}
	holds := "may grow to"
	if c.Growth == GrowthMutable {
		holds = "needs"
	}
	if c.Window > 0 {
		holds = "keeps a window of"
	}
	if row > math.MaxInt64/rows {
		cp.errorf(b.valPos, b.end,
			"state type %s %s %d rows of %d bytes, a size that overflows int64; no device can hold it: lower the %s or the field widths", c.Type, holds, rows, row, b.key)
		return
	}
	if total := rows * row; total > maxStateBytes {
		cp.errorf(b.valPos, b.end,
			"state type %s %s %s (%d rows of %d bytes), more than the %s (1<<48 bytes) a 48-bit address space maps, so no device or host can hold it: lower the %s or the field widths",
			c.Type, holds, byteSize(total), rows, row, byteSize(maxStateBytes), b.key)
	}
}
