package report

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/gpustate/gpustate/contract"
	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/placement"
)

// The report's section on past versions: how At and Plan reconstruct them,
// how far back the declared policy reaches, and, since a contract declares
// no access weights, the whole trade-off between checkpoint memory and
// expected reconstruction cost (the Pareto set) rather than one placement
// chosen for weights nobody gave.

// maxPlaces caps the places where the chart puts checkpoints: the
// dynamic program behind placement.Pareto grows quickly with the chain, and a
// report is generated on every go generate.
const maxPlaces = 64

// maxChartRows caps the rows of the Pareto table; the front's two ends and
// the points the contract selects are always shown.
const maxChartRows = 12

// workload is what the chart assumes of the versions in the retained
// window: every version costs the same to apply, and every checkpoint the
// same to seed from and to hold. Costs are in bytes copied on the device,
// the term that dominates the runtime's calibrated cost model.
type workload struct {
	every  int   // versions between two checkpoints: declared, or estimated from the budget
	window int   // versions the policy retains at most: every*keep
	apply  int64 // bytes one version's delta applies
	seed   int64 // bytes a reconstruction copies from its checkpoint first
	memory int64 // bytes one checkpoint holds apart from the head
	delta  int64 // bytes one version's delta holds, in blocks of its own
	state  int64 // bytes the head itself holds at the bound, in blocks (0: no bound)
	about  string
	// replayed is set for a state with a replay line: a version's delta is
	// its step's input, and a reconstruction runs the steps again.
	replayed bool
	// estimated is set when the policy spaces checkpoints by a budget and
	// every is what the budget makes of apply bytes a version; capped when
	// the runtime's cap of placement.MaxSpacing versions decides it instead.
	estimated, capped bool
}

// perVersion returns the rows the chart assumes an append state's version
// writes for a window of the given length: as many as fill the bound over
// the window, one at least.
func perVersion(c *contract.Contract, window int64) int64 {
	if c.Unbounded || c.Bound <= 0 || window <= 0 {
		return 1
	}
	return (c.Bound-1)/window + 1
}

// versionBytes returns the bytes the chart assumes one version writes for
// a window of the given length, at most math.MaxInt64.
func versionBytes(c *contract.Contract, window int64) int64 {
	rows := c.Bound
	if c.Growth != contract.GrowthMutable {
		rows = perVersion(c, window)
	}
	rb := gen.RowBytes(c)
	if rb > 0 && rows > math.MaxInt64/rb {
		return math.MaxInt64
	}
	return rows * rb
}

// budgetSpacing estimates the versions between two checkpoints of a
// policy spaced by budget: the runtime takes one when the deltas since
// the last one reach the budget, so at apply bytes a version that is
// ceil(budget/apply) versions, and at most placement.MaxSpacing. For an append
// state the bytes a version writes depend in turn on the window the
// spacing makes; the spacing returned is the largest consistent one,
// reached by iterating down from placement.MaxSpacing (the spacing for a
// window only grows with the window, so the iteration never goes up).
func budgetSpacing(c *contract.Contract) (every int, capped bool) {
	cp := c.Checkpoint
	step := func(every int) (int, bool) {
		apply := versionBytes(c, int64(every)*int64(cp.Keep))
		if in := inputBytes(c); in > 0 {
			apply = in // the runtime counts a step's input, not the rows it rewrites
		}
		if apply <= 0 {
			return placement.MaxSpacing, true
		}
		n := cp.Budget / apply
		if cp.Budget%apply != 0 {
			n++
		}
		if n > placement.MaxSpacing {
			return placement.MaxSpacing, true
		}
		return int(max(n, 1)), false
	}
	every = placement.MaxSpacing
	for range placement.MaxSpacing + 1 {
		next, c := step(every)
		if next == every {
			return every, c
		}
		every = next
	}
	return every, false
}

// historyWorkload returns the workload the chart assumes for c, and false
// with the reason when none can be charted.
func historyWorkload(c *contract.Contract, blockBytes int64) (workload, string, bool) {
	cp := c.Checkpoint
	if cp.Keep <= 0 || (cp.Every <= 0 && cp.Budget <= 0) {
		return workload{}, "the policy names no window (every or budget, and keep), so nothing is charted", false
	}
	w := workload{every: cp.Every}
	if cp.Every <= 0 {
		w.every, w.capped = budgetSpacing(c)
		w.estimated = true
	}
	if int64(w.every)*int64(cp.Keep) > 1<<20 {
		return workload{}, fmt.Sprintf("the window of %d versions is too long to chart", int64(w.every)*int64(cp.Keep)), false
	}
	w.window = w.every * cp.Keep
	rb := gen.RowBytes(c)
	// limit keeps every figure, summed over every checkpoint and version
	// of the window, inside an int64.
	limit := int64(math.MaxInt64) / int64(2*w.window+2)
	fbs, why := blocksOf(c, blockBytes)
	if why != "" {
		return workload{}, why, false
	}
	if !c.Unbounded && c.Bound > 0 && c.Window <= 0 {
		w.state = rowsBytes(fbs, c.Bound)
	}
	if c.Growth == contract.GrowthMutable {
		if rb > 0 && c.Bound > limit/rb || w.state > limit || deltaBytes(fbs, c.Bound) > limit {
			return workload{}, "the state is too large to chart", false
		}
		s := c.Bound * rb
		w.apply, w.seed, w.memory, w.delta = s, w.state, w.state, deltaBytes(fbs, c.Bound)
		if in := inputBytes(c); in > 0 {
			w.delta, w.replayed = in, true
			w.about = fmt.Sprintf("every version is a Step that rewrites all %d rows (%s, %s in blocks), the most a version can write. "+
				"A reconstruction copies its checkpoint's blocks on write (%s) and runs each step again, counted here as the %s it rewrites "+
				"(Plan prices it by the time the step took); a checkpoint holds a whole version (%s) once the head has rewritten it; "+
				"each version's delta is its recorded input (%s) and step function, not the rows it wrote",
				c.Bound, gen.Bytes(s), gen.Bytes(w.state), gen.Bytes(w.state), gen.Bytes(s), gen.Bytes(w.state), gen.Bytes(in))
			return w, "", true
		}
		w.about = fmt.Sprintf("every version rewrites all %d rows (%s, %s in blocks), as a simulation step does: the most a version can write. "+
			"A reconstruction copies its checkpoint's blocks on write (%s) and applies each delta in full; "+
			"a checkpoint holds a whole version (%s) once the head has rewritten it; each version's delta holds its rows in blocks of its own (%s)",
			c.Bound, gen.Bytes(s), gen.Bytes(w.state), gen.Bytes(w.state), gen.Bytes(w.state), gen.Bytes(w.delta))
		return w, "", true
	}
	pv := perVersion(c, int64(w.window))
	var block int64
	for _, fb := range fbs {
		block += fb.bytes
	}
	blockRows := fbs[0].rows
	if rb > 0 && pv > limit/rb || block > limit {
		return workload{}, "the state is too large to chart", false
	}
	w.apply, w.seed, w.memory = pv*rb, block, block
	if w.delta = deltaBytes(fbs, pv); w.delta > limit {
		return workload{}, "the state is too large to chart", false
	}
	fill := "as rows without a bound do"
	if !c.Unbounded && c.Bound > 0 {
		fill = fmt.Sprintf("so that the window fills the bound of %d rows", c.Bound)
	}
	rows := "rows"
	if pv == 1 {
		rows = "row"
	}
	w.about = fmt.Sprintf("every version appends %d %s (%s), %s. "+
		"Appended rows never change, so a checkpoint shares its full blocks with the head and holds at most its last, partly filled block of each field "+
		"(%s in blocks of %d rows), which a reconstruction copies before it applies the deltas; a version's delta holds its rows in blocks of its own (%s)",
		pv, rows, gen.Bytes(w.apply), fill, gen.Bytes(block), blockRows, gen.Bytes(w.delta))
	return w, "", true
}

// chart is the trade-off for a workload: checkpoints may be placed at
// versions that are multiples of group (counted from the oldest retained
// version), which keeps the chain placement.Pareto solves within maxPlaces.
type chart struct {
	w     workload
	group int
	chain []placement.ChainVersion
	// shift is what the grouped chain's expected cost overstates the
	// version chain's by, when the last group is shorter than the others.
	shift float64
}

func newChart(w workload) chart {
	g := (w.window + maxPlaces - 1) / maxPlaces
	n := (w.window + g - 1) / g
	ch := chart{w: w, group: g, chain: make([]placement.ChainVersion, n)}
	// A group of s versions from a checkpoint q costs, over its versions,
	// s*(seed + P(start) - P(q)) + apply*s*(s-1)/2 with P the prefix sum
	// of apply: a grouped chain with weights s, apply g*apply and seed
	// seed + apply*(g-1)/2 charges exactly that for full groups, and
	// apply*s*(g-s)/2 more for a shorter last one, whatever the placement.
	for i := range ch.chain {
		s := min(g, w.window-i*g)
		ch.chain[i] = placement.ChainVersion{
			Apply:  float64(g) * float64(w.apply),
			Seed:   float64(w.seed) + float64(w.apply)*float64(g-1)/2,
			Memory: w.memory,
			Weight: float64(s),
		}
		ch.shift += float64(w.apply) * float64(s) * float64(g-s) / 2
	}
	ch.shift /= float64(w.window)
	return ch
}

// versions turns a placement's chain indices into versions counted from
// the oldest retained one.
func (ch chart) versions(p placement.Placement) []int {
	out := make([]int, len(p.Checkpoints))
	for i, q := range p.Checkpoints {
		out[i] = q * ch.group
	}
	return out
}

// canonical returns, in chain indices, the placement of k checkpoints of
// least expected cost whose list is least in lexicographic order.
// placement.Pareto returns one of the placements of least cost for each
// memory, and which one of several equal ones depends on the order it
// meets them; the report shows this one, so that it reads the same from
// one run to the next. Every checkpoint costs the same here, so each
// version is reconstructed from the nearest checkpoint before it.
func (ch chart) canonical(k int) []int {
	n := len(ch.chain)
	if k < 1 || k > n {
		return nil
	}
	// With P the prefix sums of Apply, W those of Weight and WP those of
	// Weight*P, versions [j, end) from a checkpoint at j cost
	// Seed(j)*(W(end)-W(j)) + WP(end)-WP(j) - P(j)*(W(end)-W(j)).
	p := make([]float64, n)
	cw := make([]float64, n+1)
	cwp := make([]float64, n+1)
	for i := range n {
		if i > 0 {
			p[i] = p[i-1] + ch.chain[i].Apply
		}
		cw[i+1] = cw[i] + ch.chain[i].Weight
		cwp[i+1] = cwp[i] + ch.chain[i].Weight*p[i]
	}
	seg := func(j, end int) float64 {
		wt := cw[end] - cw[j]
		return ch.chain[j].Seed*wt + cwp[end] - cwp[j] - p[j]*wt
	}
	// f[m][j]: least cost of versions [j, n) with a checkpoint at j and m
	// more after it.
	inf := math.Inf(1)
	f := make([][]float64, k)
	for m := range f {
		f[m] = make([]float64, n)
		for j := range n {
			f[m][j] = inf
			if m == 0 {
				f[m][j] = seg(j, n)
				continue
			}
			for next := j + 1; next < n; next++ {
				f[m][j] = min(f[m][j], seg(j, next)+f[m-1][next])
			}
		}
	}
	out := []int{0}
	for m, j := k-1, 0; m > 0; m-- {
		best := f[m][j]
		for next := j + 1; next < n; next++ {
			if c := seg(j, next) + f[m-1][next]; c <= best+1e-9*math.Abs(best) {
				out = append(out, next)
				j = next
				break
			}
		}
	}
	return out
}

// expected is the expected cost of p on the version chain.
func (ch chart) expected(p placement.Placement) float64 { return p.Expected - ch.shift }

// expectedOf evaluates checkpoints at the given versions (ascending, the
// first 0) directly on the version chain, every version reconstructed from
// the nearest checkpoint at or before it (every checkpoint costs the same
// to seed from, so none further back is cheaper), under uniform access.
func (w workload) expectedOf(cps []int) float64 {
	var sum float64
	k := 0
	for v := range w.window {
		for k+1 < len(cps) && cps[k+1] <= v {
			k++
		}
		sum += float64(w.seed) + float64(v-cps[k])*float64(w.apply)
	}
	return sum / float64(w.window)
}

// history is the report's model of a state's past versions: the declared
// policy and the trade-off it sits on, computed once.
type history struct {
	typ     string
	cp      *contract.Checkpoint
	refused string // why no trade-off is charted; "" when one is
	// replayed is set for a state with a replay line, whose versions made
	// by Step keep their inputs, not write sets.
	replayed bool
	w        workload
	ch       chart
	front    []placement.Placement
	// declared is the placement the declared policy makes, a checkpoint
	// every w.every versions; same is the front's point with as many
	// checkpoints that costs as much (-1 for none), marked in the table.
	declared     []int
	declaredCost float64
	same         int
	chartFile    string // the SVG chart's file name; "" for none
}

// newHistory returns the history of c, nil when c keeps none.
func newHistory(c *contract.Contract, blockBytes int64) *history {
	if c.Checkpoint == nil || c.Snapshot == contract.SnapshotNone {
		return nil
	}
	h := &history{typ: c.Type, cp: c.Checkpoint, same: -1, replayed: c.Replay != nil}
	w, why, ok := historyWorkload(c, blockBytes)
	if !ok {
		h.refused = why
		return h
	}
	ch := newChart(w)
	front, err := placement.Pareto(ch.chain)
	if err != nil {
		h.refused = err.Error()
		return h
	}
	h.w, h.ch, h.front = w, ch, front
	for v := 0; v < w.window; v += w.every {
		h.declared = append(h.declared, v)
	}
	h.declaredCost = w.expectedOf(h.declared)
	for i, pl := range front {
		if len(pl.Checkpoints) == len(h.declared) && math.Abs(ch.expected(pl)-h.declaredCost) <= 1e-9*h.declaredCost {
			h.same = i
		}
	}
	return h
}

// write renders the section on past versions: how they are reconstructed,
// the window the policy retains, and the trade-off it sits on.
func (h *history) write(b *bytes.Buffer) {
	fmt.Fprintf(b, "\n### Past versions of %s\n\n", h.typ)
	b.WriteString("`At(v)` reconstructs version v of the head's own line as a snapshot: it seeds from a kept checkpoint at or before v " +
		"(a copy-on-write snapshot, taken in O(1)) and applies the deltas after it ")
	if h.replayed {
		b.WriteString("(each version made by `Step` runs its step function again on its recorded input; one made by `Write` or `WriteDevice` applies its write set). ")
	} else {
		b.WriteString("(each version's write set, copied on the device when it was written). ")
	}
	b.WriteString("`Plan(v)` chooses, without doing it, the checkpoint q of least estimated cost " +
		"R(v) = seed(q) + apply(q+1) + ... + apply(v) + verify(v), with costs from the pool's calibrated copy bandwidths, and lists the alternatives: " +
		"the nearest checkpoint is not assumed cheapest. `Rollback` accepts the snapshot `At` returns.\n\n")
	h.writeWindow(b)
	b.WriteString("\n\n")
	if h.refused != "" {
		fmt.Fprintf(b, "No trade-off is charted: %s.\n", h.refused)
		return
	}
	h.writeAssumptions(b)
	h.writeTable(b)
	if h.chartFile != "" {
		fmt.Fprintf(b, "![%s: checkpoint memory against expected reconstruction cost, the declared policy marked](%s)\n\n", h.typ, h.chartFile)
	}
	h.writeConclusion(b)
}

// writeWindow states the window of versions the declared policy retains.
func (h *history) writeWindow(b *bytes.Buffer) {
	cp := h.cp
	switch {
	case cp.Every > 0 && cp.Keep > 0:
		lo := int64(cp.Keep-1)*int64(cp.Every) + 1
		hi := int64(cp.Keep) * int64(cp.Every)
		fmt.Fprintf(b, "The head takes a checkpoint every %d versions and keeps the last %d, with the deltas after the oldest of them: "+
			"the last %d to %d versions of its line are reconstructable, older ones answer `state.ErrNotRetained`, "+
			"and the history's memory stays bounded.", cp.Every, cp.Keep, lo, hi)
	case cp.Budget > 0 && cp.Keep > 0:
		fmt.Fprintf(b, "The head takes a checkpoint whenever the deltas written since the last one reach %s, and keeps the last %d, with the deltas after the oldest of them: "+
			"rebuilding any retained version replays at most %s of deltas, older versions answer `state.ErrNotRetained`, "+
			"and the history's memory stays bounded. The checkpoints are spaced by bytes written, not by versions: "+
			"how many versions the history reaches back depends on the bytes each version writes (and the runtime takes a checkpoint at least every %d versions).",
			gen.Bytes(cp.Budget), cp.Keep, gen.Bytes(cp.Budget), placement.MaxSpacing)
	}
}

// writeAssumptions states what the chart assumes and how it is drawn.
func (h *history) writeAssumptions(b *bytes.Buffer) {
	w, cp := h.w, h.cp
	fmt.Fprintf(b, "**Checkpoint memory against expected reconstruction cost.** The contract declares no access weights, so none are assumed: "+
		"below is the Pareto set (`placement.Pareto`) for uniform access over a window of %d versions, costs in bytes copied. "+
		"Assumed: %s. ", w.window, w.about)
	switch {
	case w.estimated && w.capped:
		fmt.Fprintf(b, "At %s a version, the budget of %s would space checkpoints more than %d versions apart, so the runtime's cap decides: "+
			"the chart takes a checkpoint every %d versions, and the window is %d of them. ", gen.Bytes(w.apply), gen.Bytes(cp.Budget), placement.MaxSpacing, w.every, w.window)
	case w.estimated:
		fmt.Fprintf(b, "At %s a version, the budget of %s is reached %s, so the chart takes that as the declared spacing and the window as %d versions; "+
			"a state whose versions write other amounts is spaced otherwise. ", gen.Bytes(w.apply), gen.Bytes(cp.Budget), everyVersions(w.every), w.window)
	}
	if h.ch.group > 1 {
		fmt.Fprintf(b, "Checkpoints are placed at multiples of %d versions (%d places). ", h.ch.group, len(h.ch.chain))
	}
	fmt.Fprintf(b, "The window's %d deltas (one per version after its oldest checkpoint) are kept whatever the placement (%s each, %s in all): the memory column is the checkpoints' alone, the next one adds the deltas. ",
		h.deltaCount(), gen.Bytes(w.delta), gen.Bytes(h.deltas()))
	fmt.Fprintf(b, "The set has %d placements", len(h.front))
	if len(h.front) > maxChartRows {
		fmt.Fprintf(b, ", of which %d are shown", maxChartRows)
	}
	b.WriteString(".\n\n")
}

// policy names the declared policy, as a table note (short) or in prose.
func (h *history) policy(short bool) string {
	w, cp := h.w, h.cp
	switch {
	case !w.estimated && short:
		return fmt.Sprintf("every %d versions", w.every)
	case !w.estimated:
		return fmt.Sprintf("a checkpoint every %d versions", w.every)
	case short:
		return fmt.Sprintf("budget %s, about %s", gen.Bytes(cp.Budget), everyVersions(w.every))
	case w.capped:
		return fmt.Sprintf("a checkpoint per %s written or every %d versions, whichever comes first: %s here", gen.Bytes(cp.Budget), placement.MaxSpacing, everyVersions(w.every))
	}
	return fmt.Sprintf("a checkpoint per %s written, about %s here", gen.Bytes(cp.Budget), everyVersions(w.every))
}

// writeTable writes the rows of the front the report shows.
func (h *history) writeTable(b *bytes.Buffer) {
	b.WriteString("| checkpoints | memory | with the deltas | expected cost | versions with a checkpoint | note |\n| ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, i := range pickRows(len(h.front), h.same) {
		pl := h.front[i]
		vs := h.ch.versions(placement.Placement{Checkpoints: h.ch.canonical(len(pl.Checkpoints))})
		var note []string
		if i == 0 {
			note = append(note, "least memory")
		}
		if i == len(h.front)-1 {
			note = append(note, "least cost")
		}
		if i == h.same {
			note = append(note, "the declared policy: "+h.policy(true))
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s |\n", len(vs), gen.Bytes(pl.Memory), gen.Bytes(pl.Memory+h.deltas()), costText(h.ch.expected(pl)), placementText(vs), strings.Join(note, "; "))
	}
	b.WriteString("\n")
}

// writeConclusion states what the declared policy holds and costs, and
// what the front does better with as many checkpoints.
func (h *history) writeConclusion(b *bytes.Buffer) {
	cps := int64(len(h.declared)) * h.w.memory
	fmt.Fprintf(b, "The declared policy (%s) holds %d checkpoints in the window: %s of checkpoint memory for an expected cost of %s. "+
		"With the window's deltas (%s) the history holds %s",
		h.policy(false), len(h.declared), gen.Bytes(cps), costText(h.declaredCost), gen.Bytes(h.deltas()), gen.Bytes(cps+h.deltas()))
	if h.w.state > 0 {
		fmt.Fprintf(b, ", %s the %s the state itself holds at its bound", ratioText(float64(cps+h.deltas())/float64(h.w.state)), gen.Bytes(h.w.state))
	}
	b.WriteString(".")
	for _, pl := range h.front {
		if h.same < 0 && len(pl.Checkpoints) == len(h.declared) && h.ch.expected(pl) < h.declaredCost*(1-1e-9) {
			fmt.Fprintf(b, " Placed as in the set, as many checkpoints would cost %s.", costText(h.ch.expected(pl)))
		}
	}
	b.WriteString("\n")
}

// deltaCount is the most deltas the window keeps: one per version after
// its oldest checkpoint, which the runtime seeds from rather than from a
// delta of its own.
func (h *history) deltaCount() int { return max(h.w.window-1, 0) }

// deltas is what the window's deltas hold at most.
func (h *history) deltas() int64 { return int64(h.deltaCount()) * h.w.delta }

// ratioText writes a ratio of memory to the state's own: "2.5x".
func ratioText(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.1fx", r)
}

// everyVersions writes a spacing of n versions.
func everyVersions(n int) string {
	if n == 1 {
		return "every version"
	}
	return fmt.Sprintf("every %d versions", n)
}

// pickRows returns the indices of the front to show, ascending: all of
// them when they fit, else both ends, the extras (negative ones ignored),
// and points spread evenly.
func pickRows(n int, extras ...int) []int {
	if n <= maxChartRows {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	keep := map[int]bool{0: true, n - 1: true}
	for _, e := range extras {
		if e >= 0 && e < n {
			keep[e] = true
		}
	}
	for k := 0; len(keep) < maxChartRows && k < maxChartRows; k++ {
		keep[int(math.Round(float64(k)*float64(n-1)/float64(maxChartRows-1)))] = true
	}
	for i := 1; len(keep) < maxChartRows; i++ {
		keep[i] = true
	}
	var out []int
	for i := range n {
		if keep[i] {
			out = append(out, i)
		}
	}
	return out
}

// placementText lists checkpoint versions, counted from the oldest
// retained one, compactly.
func placementText(vs []int) string {
	if len(vs) > 1 {
		step := vs[1] - vs[0]
		even := true
		for i := 2; i < len(vs); i++ {
			even = even && vs[i]-vs[i-1] == step
		}
		switch {
		case even && len(vs) > 4 && step == 1:
			return fmt.Sprintf("every version from 0 to %d", vs[len(vs)-1])
		case even && len(vs) > 4:
			return fmt.Sprintf("every %d versions from 0 to %d", step, vs[len(vs)-1])
		}
	}
	parts := make([]string, 0, 7)
	for i, v := range vs {
		if len(vs) > 6 && i == 3 {
			parts = append(parts, "...")
		}
		if len(vs) > 6 && i >= 3 && i < len(vs)-3 {
			continue
		}
		parts = append(parts, fmt.Sprint(v))
	}
	return strings.Join(parts, ", ")
}

// costText writes an expected cost in bytes copied.
func costText(x float64) string {
	return gen.Bytes(int64(math.Round(x)))
}
