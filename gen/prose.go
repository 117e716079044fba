package gen

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpustate/gpustate/contract"
)

// The sentences below state a contract in words. Doc comments of generated
// code and the Markdown report share them, so the two never disagree.

// Rules states a contract in words, rule by rule: the sentences the
// generated doc comments and the report share, so the two never disagree.
type Rules struct {
	RowBytes  int64  // the bytes of one row, summed over the fields
	Growth    string // the growth law and the bound
	Ownership string // owner and isolation
	Sharing   string // prefix sharing across owners; "" without a share line
	Retention string
	Snapshot  string
	Branch    string // branches and merges
	Rollback  string
	History   string // checkpoints and how past versions are reconstructed
	Cleanup   string // the cleanup event
	// Checkpoint states the checkpoint policy in a phrase; "" without one.
	Checkpoint string
}

// RulesOf states contract c in words.
func RulesOf(c *contract.Contract) Rules {
	r := Rules{
		RowBytes:  rowBytes(c),
		Growth:    growthLaw(c),
		Ownership: ownership(c),
		Sharing:   sharingRule(c),
		Retention: retention(c),
		Snapshot:  snapshotRule(c),
		Branch:    branchRule(c),
		Rollback:  rollbackRule(c),
		History:   historyRule(c),
		Cleanup:   cleanupRule(c),
	}
	if c.Checkpoint != nil {
		r.Checkpoint = checkpointShort(c.Checkpoint)
	}
	return r
}

// rowBytes returns the bytes of one row: the sum over fields.
func rowBytes(c *contract.Contract) int64 {
	var n int64
	for _, f := range c.Fields {
		n += f.RowBytes
	}
	return n
}

// purpose ends the head type's first sentence with the contract's purpose.
func (m *model) purpose() string {
	p := strings.TrimSuffix(strings.TrimSpace(m.c.Purpose), ".")
	if p == "" {
		return "."
	}
	return ": " + p + "."
}

// lawShort states the growth law in a phrase.
func lawShort(c *contract.Contract) string {
	switch {
	case c.Growth == contract.GrowthMutable:
		return fmt.Sprintf("exactly %d rows written in place", c.Bound)
	case c.Unbounded:
		return "rows appended without a bound"
	case c.Window > 0:
		return fmt.Sprintf("rows appended, the last %d kept", c.Window)
	default:
		return fmt.Sprintf("rows appended up to %d", c.Bound)
	}
}

// checkpointShort states the checkpoint policy in a phrase.
func checkpointShort(cp *contract.Checkpoint) string {
	if cp.Every <= 0 && cp.Budget > 0 {
		s := fmt.Sprintf("a checkpoint whenever the writes since the last one reach %s", BytesExact(cp.Budget))
		if cp.Keep > 0 {
			s += fmt.Sprintf(", the last %d kept", cp.Keep)
		}
		return s + fmt.Sprintf(", so rebuilding any retained version replays at most %s of deltas", Bytes(cp.Budget))
	}
	s := fmt.Sprintf("a checkpoint every %d versions", cp.Every)
	if cp.Keep > 0 {
		s += fmt.Sprintf(", the last %d kept", cp.Keep)
	}
	return s
}

// growthLaw states the growth law and the bound in a sentence.
func growthLaw(c *contract.Contract) string {
	switch {
	case c.Growth == contract.GrowthMutable:
		return fmt.Sprintf("It holds exactly %d rows, zero at creation and written in place.%s", c.Bound, blockRule(c))
	case c.Unbounded:
		s := "Rows are only appended, without a bound"
		if c.UnboundedReason != "" {
			s += fmt.Sprintf(" (%s)", strings.TrimSuffix(c.UnboundedReason, "."))
		}
		return s + "; a written row never changes." + blockRule(c)
	case c.Window > 0:
		return fmt.Sprintf("Rows are only appended, without a limit on their count, and only the last %d stay readable: Len counts every row ever appended, so row indices stay stable, older rows answer state.ErrExpired, and their blocks go back to the pool once no snapshot holds them.%s", c.Window, blockRule(c))
	default:
		return fmt.Sprintf("Rows are only appended, up to %d rows; a written row never changes.%s", c.Bound, blockRule(c))
	}
}

// blockRule states a //state:block line, with a leading space; "" without.
func blockRule(c *contract.Contract) string {
	if c.BlockRows <= 0 {
		return ""
	}
	return fmt.Sprintf(" Each block holds %d rows of a field.", c.BlockRows)
}

// ownership states owner and isolation.
func ownership(c *contract.Contract) string {
	return fmt.Sprintf("One %s owns each state: it alone writes and releases it, and blocks that held its rows are zeroed before another owner gets them.", c.Owner)
}

// sharingRule states a //state:share line; "" without one.
func sharingRule(c *contract.Contract) string {
	if c.ShareKey == "" {
		return ""
	}
	return fmt.Sprintf("Full blocks are shared across the owners of one sharing domain, keyed by %s: a state made by %s registers each full block it appends under its %s values and those of every block before it, and AdoptPrefix gives an empty state of the same domain the longest chain of them that matches its keys, read only and stored once. The empty domain shares with nobody, no block crosses domains, and cached blocks no state holds are optional: evicted under memory pressure.",
		c.ShareKey, sharedCtorName(c.Type), c.ShareKey)
}

// retention states the retention rule.
func retention(c *contract.Contract) string {
	switch c.Retention {
	case contract.RetentionOptional:
		return "Retention is optional: the state may be evicted."
	case contract.RetentionReconstructable:
		return "Retention is reconstructable: past versions may be dropped and rebuilt from checkpoints."
	default:
		return "Retention is mandatory: the state is never evicted."
	}
}

// snapshotRule states the snapshot rule.
func snapshotRule(c *contract.Contract) string {
	if c.Snapshot == contract.SnapshotNone {
		return "No snapshots are taken (snapshot none)."
	}
	return "Snapshots are immutable and cost O(1): no rows are copied, and a snapshot stays readable after its state is released."
}

// branchRule states the branch and merge rules.
func branchRule(c *contract.Contract) string {
	if c.Branch != contract.BranchIsolated {
		return "The state is never branched (branch none)."
	}
	s := "Branches are isolated: a branch shares the rows it was branched with, stored once, and a sibling never sees another's writes."
	if c.Merge == contract.MergeFastforward {
		return s + " A branch merges back only as a fast-forward, when its parent has not changed since the branch point."
	}
	return s + " Branches are never merged back (merge=unsupported)."
}

// rollbackRule states the rollback rule.
func rollbackRule(c *contract.Contract) string {
	if !c.Rollback || c.Snapshot == contract.SnapshotNone {
		return "The state is never rolled back."
	}
	if c.Descendants == contract.DescendantsKeep {
		return "Rollback returns to an ancestor snapshot of the same owner; snapshots and branches of the abandoned line stay readable (descendants=keep)."
	}
	return "Rollback returns to an ancestor snapshot of the same owner; snapshots and branches of the abandoned line are invalidated (descendants=invalidate)."
}

// historyRule states the checkpoint rule and how versions are reconstructed.
func historyRule(c *contract.Contract) string {
	if c.Checkpoint == nil || c.Snapshot == contract.SnapshotNone {
		return "No history is kept: past versions live only as long as snapshots of them."
	}
	if c.Replay != nil {
		return fmt.Sprintf("History is kept with %s and the input of every Step (replay); a past version is reconstructed from the cheapest compatible checkpoint by running the steps after it again on their recorded inputs (versions made by Write apply their write sets). Checkpoints live in device memory and do not survive the process.", checkpointShort(c.Checkpoint))
	}
	return fmt.Sprintf("History is kept with %s; a past version is reconstructed from the cheapest compatible checkpoint plus the writes after it. Checkpoints live in device memory and do not survive the process.", checkpointShort(c.Checkpoint))
}

// cleanupRule states the cleanup event.
func cleanupRule(c *contract.Contract) string {
	if c.Cleanup == "" {
		return fmt.Sprintf("The %s releases the state when done with it; no cleanup event is named.", c.Owner)
	}
	return fmt.Sprintf("The %s releases the state on %s.", c.Owner, c.Cleanup)
}

// contractProse states the whole contract, for the head type's doc comment.
func (m *model) contractProse() []string {
	c := m.c
	return []string{
		growthLaw(c) + " " + fmt.Sprintf("One owner's rows take at most %s.", maxBytesShort(c)),
		strings.TrimSpace(ownership(c) + " " + cleanupRule(c) + " " + sharingRule(c)),
		snapshotRule(c) + " " + branchRule(c) + " " + rollbackRule(c) + " " + historyRule(c) + " " + retention(c),
	}
}

func maxBytesShort(c *contract.Contract) string {
	if c.Window > 0 {
		return windowBytes(c)
	}
	if c.Unbounded || c.Bound <= 0 {
		return "no bounded size: " + BytesExact(rowBytes(c)) + " per row"
	}
	if rb := rowBytes(c); rb > 0 && c.Bound > math.MaxInt64/rb {
		return "more than " + BytesExact(math.MaxInt64)
	}
	return BytesExact(c.Bound * rowBytes(c))
}

// releaseDuty states who releases what the method returns.
func releaseDuty(what string) string {
	return fmt.Sprintf("The caller must Release the %s on every path (statevet's stcleanup checks it).", what)
}

// rowsOf describes how many rows a batch holds.
func rowsOf(c *contract.Contract) string {
	f := c.Fields[0]
	if f.Width == 1 {
		return fmt.Sprintf("len(rows.%s) rows", f.Name)
	}
	return fmt.Sprintf("len(rows.%s)/%d rows", f.Name, f.Width)
}

func appendDoc(c *contract.Contract) []string {
	p := "Append appends the rows of a batch: " + rowsOf(c) + ", and every field must hold the same number of whole rows, else state.ErrShape."
	if bounded(c) {
		p += fmt.Sprintf(" Append returns state.ErrBound once the state holds %d rows, and appends nothing when the batch would pass that bound.", c.Bound)
	}
	if window(c) {
		p += fmt.Sprintf(" The rows that fall below the window of the last %d expire; Append returns state.ErrBound, and appends nothing, for a batch of more than %d rows.", c.Window, c.Window)
	}
	p += " A failed Append changes nothing."
	return []string{p}
}

func writeDoc(c *contract.Contract) []string {
	return []string{fmt.Sprintf("Write replaces rows [at, at+n) with the n rows of a batch: %s, the same number in every field, else state.ErrShape. It returns state.ErrRange unless 0 <= at and at+n <= %d. Snapshots and branches never see the write. A failed Write changes nothing.", strings.Replace(rowsOf(c), " rows", "", 1), c.Bound)}
}

// Bytes writes n bytes in the largest binary unit under it, to one
// decimal where it is not whole: "512 B", "4 KiB", "1.5 KiB". It is the one
// byte formatter of stategen's output; BytesExact builds on it.
func Bytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), ""
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		if v < 1024 {
			break
		}
		v /= 1024
		u = unit
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%d %s", int64(v), u)
	}
	return fmt.Sprintf("%.1f %s", v, u)
}

// BytesExact writes a byte count exactly, with Bytes's form after it where
// a binary unit fits: "1 byte", "512 bytes", "1536 bytes (1.5 KiB)".
func BytesExact(n int64) string {
	switch {
	case n == 1:
		return "1 byte"
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d bytes (%s)", n, Bytes(n))
}

// wrap breaks text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	var line strings.Builder
	for _, w := range strings.Fields(text) {
		if line.Len() > 0 && line.Len()+1+len(w) > width {
			lines = append(lines, line.String())
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	if line.Len() > 0 {
		lines = append(lines, line.String())
	}
	return lines
}

// RowBytes returns the bytes of one row of contract c: the sum over its
// fields.
func RowBytes(c *contract.Contract) int64 { return rowBytes(c) }

// windowBytes states the readable bytes of a window: W rows.
func windowBytes(c *contract.Contract) string {
	if rb := rowBytes(c); rb > 0 && c.Window > math.MaxInt64/rb {
		return "more than " + BytesExact(math.MaxInt64)
	}
	return BytesExact(c.Window*rowBytes(c)) + " in the window"
}

// article returns word after its indefinite article: "a Recurrent", "an
// AttnKV", "an owner", "a user". The article goes by the first letter, a
// vowel taking "an", except a u read as "you" (Unit, User, Uniform).
func article(word string) string {
	lower := strings.ToLower(word)
	switch {
	case lower == "":
		return word
	case strings.HasPrefix(lower, "u"):
		for _, you := range []string{"uni", "use", "usa", "usu", "uti", "ura", "ure", "uri", "uro", "ubi"} {
			if strings.HasPrefix(lower, you) {
				return "a " + word
			}
		}
		return "an " + word
	case strings.ContainsRune("aeio", rune(lower[0])):
		return "an " + word
	}
	return "a " + word
}
