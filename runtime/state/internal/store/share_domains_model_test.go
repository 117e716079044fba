package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// A model of prefix-shared heads of several owners and domains,
// appending from the host, through device spans and through AppendAsync on
// streams held by gates, taking snapshots and branches, rolling back,
// merging, releasing, forgetting prefixes, under a cap with or without a
// host tier; probes of non-shared heads of every owner check that no block
// reaches an owner with rows it never held.

// domRows returns rows [from, to) of toks salted by salt: each row's vector
// derives from the salt and every token up to it.
func domRows(salt uint32, toks []int32, from, to int) [][]byte {
	cols := [][]byte{{}, {}}
	h := uint32(2166136261) ^ salt*0x9e3779b9
	for i, t := range toks[:to] {
		h = (h ^ uint32(t)) * 16777619
		if i < from {
			continue
		}
		for j := range 8 {
			cols[0] = binary.LittleEndian.AppendUint32(cols[0], h+uint32(j)+1)
		}
		cols[1] = binary.LittleEndian.AppendUint32(cols[1], uint32(t))
	}
	return cols
}

// domSeeds returns the seeds a model runs: lo to hi, or the first alone
// under the race detector, which runs the models many times slower.
func domSeeds(lo, hi uint64) (uint64, uint64) {
	if raceDetector {
		return lo, lo
	}
	return lo, hi
}

// stallAfter is how long a model run may take before its watchdog
// reports a stall, with every goroutine's stack.
var stallAfter = map[bool]time.Duration{false: 20 * time.Second, true: 120 * time.Second}[raceDetector]

// domHoldMs is the longest a gate holds a stream, in milliseconds.
func domHoldMs() int { return 3 }

type domHandle struct {
	ref   *RefHandle
	toks  []int32
	dom   Domain
	owner Owner
}

type domConf struct {
	name     string
	capped   bool
	tier     bool
	invalid  bool
	blockRow int
}

func TestShareDomainsModel(t *testing.T) {
	confs := []domConf{
		{name: "free", blockRow: 16},
		{name: "capped", capped: true, blockRow: 16},
		{name: "tier", capped: true, tier: true, blockRow: 16},
		{name: "tier-invalidate", capped: true, tier: true, invalid: true, blockRow: 16},
		{name: "free-invalidate", invalid: true, blockRow: 16},
	}
	for _, c := range confs {
		lo, hi := domSeeds(1, 6)
		for seed := lo; seed <= hi; seed++ {
			t.Run(fmt.Sprintf("%s/%d", c.name, seed), func(t *testing.T) {
				runDomainsModel(t, c, seed, 1500)
			})
		}
	}
}

// domRig is a model run's rig: a queued rig's pool, capped (a cap of
// capKiB KiB and stepKiB more for each of the seed's remainder by 3) and
// with a host tier as c says, two
// of its streams, and a watchdog that reports a stall with every
// goroutine's stack, which stop ends.
func domRig(t *testing.T, c domConf, seed uint64, capKiB, stepKiB int64) (r *queuedRig, p *Pool, streams []device.Stream, stop func() bool) {
	debug.SetTraceback("all")
	dog := time.AfterFunc(stallAfter, func() { panic(fmt.Sprintf("%s seed %d: stalled", c.name, seed)) })
	r = newQueuedRig(t)
	opt := PoolOptions{BlockBytes: 256}
	if c.capped {
		opt.MaxBytes = (capKiB + stepKiB*int64(seed%3)) << 10
		opt.PendingWait = 50 * time.Millisecond
	}
	if c.tier {
		opt.HostTier = 16 << 10
	}
	p, err := NewPool(r.b, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r, p, []device.Stream{r.stream(t), r.stream(t)}, dog.Stop
}

// domFinish forgets the domains' prefixes once every handle is released,
// and checks that the pool holds nothing and its invariants hold; it
// returns the pool's stats.
func domFinish(p *Pool, fail func(string, ...any), domains ...Domain) PoolStats {
	for _, d := range domains {
		p.ForgetPrefixes(d)
	}
	p.WaitPending()
	if err := checkInvariants(p); err != nil {
		fail("invariants at the end: %v", err)
	}
	s := p.Stats()
	if s.Blocks != 0 || s.CachedBytes != 0 || s.Live != 0 || s.LogicalBytes != 0 || s.TierBytes != 0 || s.PendingBytes != 0 {
		fail("after releasing everything and forgetting: blocks %d cached %d live %d logical %d tier %d pending %d",
			s.Blocks, s.CachedBytes, s.Live, s.LogicalBytes, s.TierBytes, s.PendingBytes)
	}
	return s
}

func runDomainsModel(t *testing.T, c domConf, seed uint64, steps int) {
	r, p, streams, stop := domRig(t, c, seed, 32, 8)
	defer stop()
	rng := rand.New(rand.NewPCG(seed, seed*31+7))
	l := prompt(c.blockRow, 160)
	l.Descendants = Keep
	if c.invalid {
		l.Descendants = Invalidate
	}
	salts := map[Domain]uint32{"d1": 11, "d2": 22}
	owners := map[Domain][]Owner{"d1": {"a", "b"}, "d2": {"c"}}
	// seen: every KV row (column 0) each owner ever held.
	seen := map[Owner]map[string]bool{"a": {}, "b": {}, "c": {}, "u": {}}
	see := func(o Owner, cols [][]byte) {
		for i := 0; i+32 <= len(cols[0]); i += 32 {
			seen[o][string(cols[0][i:i+32])] = true
		}
	}
	templates := [][]int32{tokens(1, 100), tokens(2, 64), tokens(3, 40)}
	var hs []*domHandle
	var step int
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s seed %d step %d: %s", c.name, seed, step, fmt.Sprintf(format, args...))
	}
	newToks := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = 900000 + rng.Int32N(3)
		}
		return out
	}
	var noMems int
	evictState := func() [4]int64 {
		s := p.Stats()
		return [4]int64{s.Evictions, s.EvictedBytes, s.TierOut, s.TierDropped}
	}
	// noMem reports whether err is ErrNoMemory, failing when the call
	// evicted anything.
	noMem := func(what string, err error, before [4]int64) bool {
		if !errors.Is(err, ErrNoMemory) {
			return false
		}
		noMems++
		if !c.capped {
			fail("%s: %v without a cap", what, err)
		}
		if after := evictState(); after != before {
			t.Errorf("%s seed %d step %d: %s failed with ErrNoMemory yet evicted: evictions/evictedBytes/tierOut/tierDropped %v -> %v",
				c.name, seed, step, what, before, after)
		}
		return true
	}
	// appendRows appends toks[from:] to x by a random path; false when the
	// pool had no room (nothing changed).
	appendRows := func(x *domHandle, from int) bool {
		rows := domRows(salts[x.dom], x.toks, from, len(x.toks))
		n := len(x.toks) - from
		if n == 0 {
			return true
		}
		before := evictState()
		var err error
		mode := rng.IntN(3)
		switch mode {
		case 0:
			err = x.ref.Head.Append(rows)
		case 1:
			var spans [][]device.Span
			if spans, err = x.ref.Head.AppendDevice(n); err == nil {
				kernelFill(t, p.Backend(), spans, rows, []int{32, 4})
			}
		case 2:
			st := streams[rng.IntN(len(streams))]
			if rng.IntN(2) == 0 {
				open := r.hold(t, st)
				openAfter(open, time.Duration(rng.IntN(domHoldMs()))*time.Millisecond)
			}
			err = x.ref.Head.AppendAsync(st, rows)
		}
		if noMem(fmt.Sprintf("append mode %d of %d rows", mode, n), err, before) {
			return false
		}
		if err != nil {
			fail("append mode %d: %v", mode, err)
		}
		x.ref.Append(rows)
		see(x.owner, rows)
		return true
	}
	heads := func() []*domHandle {
		var out []*domHandle
		for _, x := range hs {
			if x.ref.Head != nil && !x.ref.Invalid {
				out = append(out, x)
			}
		}
		return out
	}
	remove := func(x *domHandle) { hs = slices.DeleteFunc(hs, func(y *domHandle) bool { return y == x }) }
	release := func(x *domHandle) {
		var err error
		if x.ref.Head != nil {
			err = x.ref.Head.Release()
		} else {
			err = x.ref.Snap.Release()
		}
		if err != nil {
			fail("release %s: %v", x.ref.Kind(), err)
		}
		x.ref.Release()
		remove(x)
	}
	var adoptedRows int
	for step = 0; step < steps; step++ {
		op := rng.IntN(22)
		hd := heads()
		switch {
		case len(hd) == 0 || op < 4:
			if len(hs) > 14 {
				continue
			}
			d := Domain("d1")
			if rng.IntN(3) == 0 {
				d = "d2"
			}
			os := owners[d]
			o := os[rng.IntN(len(os))]
			tpl := templates[rng.IntN(len(templates))]
			toks := append(append([]int32(nil), tpl[:rng.IntN(len(tpl)+1)]...), newToks(rng.IntN(8))...)
			h, err := p.NewSharedHead(l, o, d)
			if err != nil {
				fail("NewSharedHead: %v", err)
			}
			x := &domHandle{toks: toks, dom: d, owner: o}
			x.ref = NewRefLineage(o, l).NewHead(h)
			before := evictState()
			n, err := h.AdoptPrefix(keyBytes(toks))
			if noMem("adopt", err, before) {
				check(t, h.Release())
				continue
			}
			if err != nil {
				fail("adopt: %v", err)
			}
			if n%l.BlockRows != 0 || n > len(toks) {
				fail("adopt of %d tokens gave %d rows", len(toks), n)
			}
			if n > 0 {
				x.ref.Append(domRows(salts[d], toks, 0, n))
				see(o, x.ref.Cols)
				adoptedRows += n
			}
			hs = append(hs, x)
			if !appendRows(x, n) {
				x.toks = x.toks[:n]
			}
		case op < 8:
			x := hd[rng.IntN(len(hd))]
			more := newToks(1 + rng.IntN(24))
			if len(x.toks)+len(more) > l.Bound {
				continue
			}
			from := len(x.toks)
			x.toks = append(x.toks[:from:from], more...)
			if !appendRows(x, from) {
				x.toks = x.toks[:from]
			}
		case op < 10:
			if len(hs) > 14 {
				continue
			}
			x := hd[rng.IntN(len(hd))]
			before := evictState()
			s, err := x.ref.Head.Snapshot()
			if noMem("snapshot", err, before) {
				continue
			}
			if err != nil {
				fail("snapshot: %v", err)
			}
			hs = append(hs, &domHandle{ref: x.ref.Snapshot(s), toks: x.toks, dom: x.dom, owner: x.owner})
		case op < 12:
			if len(hs) > 14 {
				continue
			}
			x := hd[rng.IntN(len(hd))]
			before := evictState()
			b, err := x.ref.Head.Branch()
			if noMem("branch", err, before) {
				continue
			}
			if err != nil {
				fail("branch: %v", err)
			}
			hs = append(hs, &domHandle{ref: x.ref.Branch(b), toks: x.toks, dom: x.dom, owner: x.owner})
		case op < 14:
			x := hd[rng.IntN(len(hd))]
			var targets []*domHandle
			for _, y := range hs {
				if y.ref.Snap != nil && y.ref.Lin == x.ref.Lin && !y.ref.Invalid {
					targets = append(targets, y)
				}
			}
			if len(targets) == 0 {
				continue
			}
			to := targets[rng.IntN(len(targets))]
			can := x.ref.CanRollback(to.ref)
			before := evictState()
			err := x.ref.Head.Rollback(to.ref.Snap)
			if noMem("rollback", err, before) {
				continue
			}
			if can != (err == nil) {
				fail("rollback: reference says %v, store %v", can, err)
			}
			if err == nil {
				x.ref.Rollback(to.ref)
				x.toks = to.toks
			}
		case op < 16:
			x := hd[rng.IntN(len(hd))]
			var kids []*domHandle
			for _, y := range hd {
				if y != x && y.ref.Lin == x.ref.Lin {
					kids = append(kids, y)
				}
			}
			if len(kids) == 0 {
				continue
			}
			k := kids[rng.IntN(len(kids))]
			can := x.ref.CanMerge(k.ref)
			before := evictState()
			err := x.ref.Head.Merge(k.ref.Head)
			if noMem("merge", err, before) {
				continue
			}
			if can != (err == nil) {
				fail("merge: reference says %v, store %v", can, err)
			}
			if err == nil {
				x.ref.Merge(k.ref)
				x.toks = k.toks
			}
		case op < 18 || op >= 20:
			release(hs[rng.IntN(len(hs))])
		case op < 19 && rng.IntN(3) == 0:
			d := Domain("d1")
			if rng.IntN(2) == 0 {
				d = "d2"
			}
			p.ForgetPrefixes(d)
		case op == 19:
			// A probe: a non-shared head of any owner appends device rows
			// it leaves unwritten; each must read as zeros or as a row the
			// owner held.
			all := []Owner{"a", "b", "c", "u"}
			o := all[rng.IntN(len(all))]
			h, err := p.NewHead(l, o)
			if err != nil {
				fail("probe NewHead: %v", err)
			}
			n := 16 * (1 + rng.IntN(4))
			before := evictState()
			_, err = h.AppendDevice(n)
			if noMem("probe AppendDevice", err, before) {
				check(t, h.Release())
				continue
			}
			if err != nil {
				fail("probe AppendDevice: %v", err)
			}
			got := readPrompt(t, h)
			zero := make([]byte, 32)
			for i := 0; i < n; i++ {
				row := got[0][i*32 : i*32+32]
				if !bytes.Equal(row, zero) && !seen[o][string(row)] {
					who := []Owner{}
					for oo, m := range seen {
						if m[string(row)] {
							who = append(who, oo)
						}
					}
					fail("probe of owner %s: row %d reads %x, which the owner never held (held by %v)", o, i, row[:8], who)
				}
			}
			if o == "u" {
				// u's own rows, so its next probes may see them.
				check(t, h.Release())
			} else {
				check(t, h.Release())
			}
		}
		for i, x := range hs {
			if x.ref.Invalid {
				continue
			}
			var rd reader = x.ref.Head
			if x.ref.Head == nil {
				rd = x.ref.Snap
			}
			if rd.Len() != x.ref.Rows() {
				fail("handle %d (%s, %s/%s): Len %d, model %d", i, x.ref.Kind(), x.dom, x.owner, rd.Len(), x.ref.Rows())
			}
			got := readPrompt(t, rd)
			want := domRows(salts[x.dom], x.toks, 0, len(x.toks))
			for c := range 2 {
				if !bytes.Equal(got[c], x.ref.Cols[c]) || !bytes.Equal(want[c], x.ref.Cols[c]) {
					rb := []int{32, 4}[c]
					for row := 0; row*rb < len(got[c]); row++ {
						if !bytes.Equal(got[c][row*rb:row*rb+rb], x.ref.Cols[c][row*rb:row*rb+rb]) {
							fail("handle %d (%s, %s/%s, %d rows): column %d row %d reads %x, model %x", i, x.ref.Kind(), x.dom, x.owner, x.ref.Rows(), c, row, got[c][row*rb:row*rb+rb], x.ref.Cols[c][row*rb:row*rb+rb])
						}
					}
					fail("handle %d: the model's rows differ from its tokens'", i)
				}
			}
			if x.ref.Head != nil && x.ref.Head.Version() != x.ref.V {
				fail("handle %d: version %d, model %d", i, x.ref.Head.Version(), x.ref.V)
			}
		}
		if step%50 == 0 {
			if err := checkInvariants(p); err != nil {
				fail("invariants: %v", err)
			}
		}
	}
	for len(hs) > 0 {
		release(hs[len(hs)-1])
	}
	s := domFinish(p, fail, "d1", "d2")
	t.Logf("nomem %d adopted %d rows; evictions %d, tier out %d in %d dropped %d", noMems, adoptedRows, s.Evictions, s.TierOut, s.TierIn, s.TierDropped)
}
