package report

import (
	"bytes"
	"fmt"

	"github.com/gpustate/gpustate/contract"
	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/placement"
)

// replayText prices the history of a contract with a replay line: its
// checkpoints plus the recorded inputs, against write sets of every row
// (a step rewrites the whole state). "" without a replay line.
func replayText(c *contract.Contract) string {
	r, cp := c.Replay, c.Checkpoint
	if r == nil || cp == nil || cp.Keep <= 0 || c.Growth != contract.GrowthMutable {
		return ""
	}
	in := inputBytes(c)
	state := c.Bound * gen.RowBytes(c)
	if in <= 0 || state <= 0 {
		return ""
	}
	every := int64(cp.Every)
	if every == 0 { // spaced by budget: the runtime counts the inputs' bytes
		every = min(int64(placement.MaxSpacing), (cp.Budget+in-1)/in)
	}
	keep := int64(cp.Keep)
	replayed := keep*state + every*keep*in
	writes := keep*state + every*keep*state
	var b bytes.Buffer
	fmt.Fprintf(&b, "\n### Replayed history of %s\n\n", c.Type)
	fmt.Fprintf(&b, "`Step` keeps each version's input (`%s`) and step function instead of the rows it wrote; `At` and `Rollback` run the steps again from a checkpoint, "+
		"and `Plan` prices each by the time it took when it ran. With %d checkpoints of %s kept, %d versions apart, and one input row of %s a step, "+
		"the history holds at most %s (checkpoints plus inputs), against %s for write sets of every row: %.3f of it.",
		r.Input, keep, gen.Bytes(state), every, gen.Bytes(in), gen.Bytes(replayed), gen.Bytes(writes), float64(replayed)/float64(writes))
	if r.Verify {
		b.WriteString(" Each step records a 64-bit hash of its rows (`verify=hash`); a replay that hashes otherwise answers `state.ErrReplayDiverged`.")
	}
	b.WriteString("\n")
	return b.String()
}

// inputBytes returns the bytes of one input row of a replayed contract,
// what its history keeps of each version made by Step; 0 without a replay
// line.
func inputBytes(c *contract.Contract) int64 {
	if c.Replay == nil {
		return 0
	}
	var in int64
	for _, f := range c.Replay.Fields {
		in += f.RowBytes
	}
	return in
}
