package contract

import (
	"math"
	"strings"
)

// growth parses //state:growth append|mutable bound=B [reason="..."].
func (cp *contractParse) growth(d *directive) {
	name := cp.name
	words, kv := cp.split(d, "bound", "reason")
	law := cp.enumWord(d, words, "a growth law", "append", "mutable")
	switch law {
	case "append":
		cp.c.Growth = GrowthAppend
	case "mutable":
		cp.c.Growth = GrowthMutable
	default:
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
	if b == nil || c.Bound <= 0 || len(c.Fields) == 0 {
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
	if row > math.MaxInt64/c.Bound {
		cp.errorf(b.valPos, b.end,
			"state type %s %s %d rows of %d bytes, a size that overflows int64; no device can hold it: lower the bound or the field widths", c.Type, holds, c.Bound, row)
		return
	}
	if total := c.Bound * row; total > maxStateBytes {
		cp.errorf(b.valPos, b.end,
			"state type %s %s %s (%d rows of %d bytes), more than the %s (1<<48 bytes) a 48-bit address space maps, so no device or host can hold it: lower the bound or the field widths",
			c.Type, holds, byteSize(total), c.Bound, row, byteSize(maxStateBytes))
	}
}
