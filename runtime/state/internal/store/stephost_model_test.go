package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// hsRecur is recur as a HostStepper that writes its rows in place.
type hsRecur struct{}

func (hsRecur) StepHost(rows, in [][]byte) error {
	recur(rows, in)
	return nil
}

// hsOwn is recur as a HostStepper that sets every column to a slice of
// its own (a fresh one per call).
type hsOwn struct{}

func (hsOwn) StepHost(rows, in [][]byte) error {
	for c := range rows {
		rows[c] = bytes.Clone(rows[c])
	}
	recur(rows, in)
	return nil
}

// hsBackends are the backends a host step runs on: the host (rows in
// place) and a wrapper the store does not know for host memory (rows
// copied out and back).
func hsBackends() []struct {
	name string
	b    func() device.Backend
} {
	return []struct {
		name string
		b    func() device.Backend
	}{
		{"host", func() device.Backend { return device.Host() }},
		{"counts", func() device.Backend { return statetest.NewCounts(device.Host()) }},
	}
}

func hsPool(t *testing.T, b device.Backend, opt PoolOptions) *Pool {
	t.Helper()
	p, err := NewPool(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		b.Close()
	})
	fixedModel(p)
	return p
}

// TestHostBranchesConcurrent: branches of one head whose versions
// were made by host steps step by host steps, roll back and rebuild
// their versions by At, each in a goroutine of its own, while they share
// the step records of the versions before the branch (replayed at once
// on several branches).
func TestHostBranchesConcurrent(t *testing.T) {
	for _, be := range hsBackends() {
		for _, verify := range []bool{false, true} {
			for _, bb := range []int{64, 4096} { // several blocks a column, or one
				t.Run(fmt.Sprint(be.name, verify, bb), func(t *testing.T) {
					p := hsPool(t, be.b(), PoolOptions{BlockBytes: bb})
					runStepBranchesConcurrent(t, p, func(h *Head, in [][]byte, k int) error {
						if k%2 == 1 {
							return h.StepHostWith(in, verify, hsOwn{})
						}
						return h.StepHostWith(in, verify, hsRecur{})
					})
				})
			}
		}
	}
}

// hsBad is a host step that fails in one of several ways after
// writing rows.
type hsBad struct{ how string }

var errHostStep = errors.New("host step: step failed on purpose")

func (f hsBad) StepHost(rows, in [][]byte) error {
	recur(rows, in) // rows written first, in place where they are the blocks'
	switch f.how {
	case "fail":
		return errHostStep
	case "panic":
		panic("host step: step panicked on purpose")
	case "long":
		rows[1] = append(bytes.Clone(rows[1]), 0)
	case "short":
		rows[0] = rows[0][:len(rows[0])-1]
	case "nil":
		rows[1] = nil
	case "long0": // the first column, after which the second is fine
		rows[0] = make([]byte, len(rows[0])+16)
	case "ownshort": // a slice of its own, short, in the last column
		rows[1] = make([]byte, len(rows[1])-8)
	}
	return nil
}

// TestHostStepFailuresKeepTheHead: a host step that fails, panics,
// or leaves a column of another length fails (ErrShape for the lengths)
// and leaves the head exactly as before: its version, rows, stats, and
// the versions At rebuilds; and the head steps on as before.
func TestHostStepFailuresKeepTheHead(t *testing.T) {
	for _, be := range hsBackends() {
		for _, bb := range []int{64, 4096} {
			for _, snap := range []bool{false, true} { // a snapshot holds the rows: the step copies
				for _, how := range []string{"fail", "panic", "long", "short", "nil", "long0", "ownshort"} {
					t.Run(fmt.Sprint(be.name, bb, snap, how), func(t *testing.T) {
						p := hsPool(t, be.b(), PoolOptions{BlockBytes: bb})
						h := must[*Head](t)(p.NewHead(recLayout(3, 3, Keep), "me"))
						defer h.Release()
						cur := readAll(t, h)
						ref := map[Version][][]byte{h.Version(): cloneCols(cur)}
						for i := range 4 {
							in := [][]byte{{byte(i + 1), 9}}
							check(t, h.StepHostWith(in, i%2 == 0, hsRecur{}))
							recur(cur, in)
							ref[h.Version()] = cloneCols(cur)
						}
						if snap {
							s := must[*Snap](t)(h.Snapshot())
							defer s.Release()
						}
						before, v := h.Stats(), h.Version()
						vs := h.hist.versions()
						in := [][]byte{{7, 7, 7}}
						var err error
						func() {
							defer func() {
								if r := recover(); r != nil {
									err = fmt.Errorf("panicked: %v", r)
								}
							}()
							err = h.StepHostWith(in, true, hsBad{how})
						}()
						switch how {
						case "fail":
							if !errors.Is(err, errHostStep) {
								t.Fatalf("StepHostWith: %v, want the step's error", err)
							}
						case "panic":
							if err == nil {
								t.Fatal("a panicking step did not panic")
							}
						default:
							if !errors.Is(err, ErrShape) {
								t.Fatalf("StepHostWith: %v, want ErrShape", err)
							}
						}
						if st := h.Stats(); h.Version() != v || st.Version != before.Version || st.Rows != before.Rows || st.LogicalBytes != before.LogicalBytes {
							t.Fatalf("the failed step changed the head: %+v, was %+v", st, before)
						}
						if got := readAll(t, h); !equalCols(got, cur) {
							t.Fatal("the failed step changed the rows")
						}
						if got := h.hist.versions(); len(got) != len(vs) {
							t.Fatalf("the history holds versions %v, held %v", got, vs)
						}
						for _, v := range vs {
							s := must[*Snap](t)(h.At(v))
							got := readAll(t, s)
							check(t, s.Release())
							if !equalCols(got, ref[v]) {
								t.Fatalf("At(%d) after the failed step reads otherwise", v)
							}
						}
						check(t, h.StepHostWith(in, true, hsRecur{}))
						recur(cur, in)
						if got := readAll(t, h); !equalCols(got, cur) {
							t.Fatal("a step after the failed one reads otherwise")
						}
						checkInv(t, p)
					})
				}
			}
		}
	}
}

// hsKeeper is a host step that keeps a buffer of its own from call to
// call and hands it over as the next rows of column 0 (legal: a slice of
// its own of the same length), and the rows it was handed in column 1
// as is.
type hsKeeper struct{ buf *[]byte }

func (f hsKeeper) StepHost(rows, in [][]byte) error {
	*f.buf = append((*f.buf)[:0], rows[0]...)
	recur([][]byte{*f.buf, rows[1]}, in)
	rows[0] = *f.buf
	return nil
}

// TestHostStepKeepsItsOwnSlice: a step function that hands over the
// same slice of its own every call: every version reads as the steps
// made it, and At rebuilds each (replaying the same function).
func TestHostStepKeepsItsOwnSlice(t *testing.T) {
	for _, be := range hsBackends() {
		for _, verify := range []bool{false, true} {
			t.Run(fmt.Sprint(be.name, verify), func(t *testing.T) {
				p := hsPool(t, be.b(), PoolOptions{BlockBytes: 64})
				h := must[*Head](t)(p.NewHead(recLayout(4, 2, Keep), "me"))
				defer h.Release()
				cur := readAll(t, h)
				ref := map[Version][][]byte{h.Version(): cloneCols(cur)}
				f := hsKeeper{buf: new([]byte)}
				for i := range 12 {
					in := [][]byte{{byte(i), 5}}
					check(t, h.StepHostWith(in, verify, f))
					// Mangle the buffer between calls: its bytes are not the state's.
					for k := range *f.buf {
						(*f.buf)[k] = 0xAA
					}
					recur(cur, in)
					ref[h.Version()] = cloneCols(cur)
					if got := readAll(t, h); !equalCols(got, cur) {
						t.Fatalf("step %d reads otherwise", i)
					}
				}
				for _, v := range h.hist.versions() {
					s := must[*Snap](t)(h.At(v))
					got := readAll(t, s)
					check(t, s.Release())
					if !equalCols(got, ref[v]) {
						t.Fatalf("At(%d) reads otherwise", v)
					}
				}
			})
		}
	}
}

// hsRecL is a mutable kv layout of 40 rows (three blocks of keys, two
// of values in 256-byte blocks) of retention ret, replayed.
func hsRecL(ret Retention, every, keep int) *Layout {
	l := kv(Mutable, 40, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: every, Keep: keep}
	l.Retention = ret
	return l
}

// TestHostStepEvictedConcurrent: reconstructable heads whose
// versions are made by host steps, each stepped, read and rebuilt by At
// in a goroutine of its own, in a capped pool that another goroutine's
// appends press, so that eviction takes the heads and their next calls
// rebuild them by replaying their host steps. A step that finds no room
// (ErrNoMemory) leaves its head as it was.
func TestHostStepEvictedConcurrent(t *testing.T) {
	for _, be := range hsBackends() {
		t.Run(be.name, func(t *testing.T) {
			p := hsPool(t, be.b(), PoolOptions{BlockBytes: 256, MaxBytes: 96 * 256})
			const n = 4
			done := make(chan error, n+1)
			stop := make(chan struct{})
			var heads []*Head
			for g := range n {
				h := must[*Head](t)(p.NewHead(hsRecL(Reconstructable, 3, 2), Owner(fmt.Sprint("r", g))))
				heads = append(heads, h)
			}
			for g, h := range heads {
				go func() {
					done <- func() error {
						cur, err := readCols40(h)
						if err != nil {
							return err
						}
						ref := map[Version][][]byte{h.Version(): cloneCols(cur)}
						noMem := 0
						for i := range 60 {
							in := [][]byte{{byte(g), byte(i), 3}}
							var f HostStepper = hsRecur{}
							if i%3 == 1 {
								f = hsOwn{}
							}
							v := h.Version()
							err := h.StepHostWith(in, i%2 == 0, f)
							switch {
							case errors.Is(err, ErrNoMemory):
								noMem++
								if h.Version() != v {
									return fmt.Errorf("head %d, step %d: a step without room moved the version", g, i)
								}
							case err != nil:
								return fmt.Errorf("head %d, step %d: %w", g, i, err)
							default:
								recur(cur, in)
								ref[h.Version()] = cloneCols(cur)
							}
							got, err := readCols40(h)
							if errors.Is(err, ErrNoMemory) {
								continue // no room to rebuild now
							}
							if err != nil {
								return fmt.Errorf("head %d, step %d: read: %w", g, i, err)
							}
							if !equalCols(got, cur) {
								return fmt.Errorf("head %d, step %d: the head reads otherwise than its steps made it", g, i)
							}
							if i%4 == 3 {
								vs := h.hist.versions()
								v := vs[i%len(vs)]
								s, err := h.At(v)
								if errors.Is(err, ErrNoMemory) {
									continue
								}
								if err != nil {
									return fmt.Errorf("head %d, step %d: At(%d): %w", g, i, v, err)
								}
								got, err := readCols40(s)
								s.Release()
								if err != nil && !errors.Is(err, ErrEvicted) {
									return err
								}
								if err == nil && !equalCols(got, ref[v]) {
									return fmt.Errorf("head %d, step %d: At(%d) reads otherwise", g, i, v)
								}
							}
						}
						return nil
					}()
				}()
			}
			go func() {
				done <- func() error {
					var ms []*Head
					defer func() {
						for _, m := range ms {
							m.Release()
						}
					}()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return nil
						default:
						}
						m, err := p.NewHead(wide("Session", Mandatory), Owner(fmt.Sprint("m", i)))
						if err != nil {
							return err
						}
						ms = append(ms, m)
						for k := range 4 {
							if err := m.Append(wideRow(byte(i + k))); err != nil && !errors.Is(err, ErrNoMemory) && !errors.Is(err, ErrEvicted) {
								return err
							}
						}
						if len(ms) > 12 {
							ms[0].Release()
							ms = ms[1:]
						}
					}
				}()
			}()
			for range n {
				if err := <-done; err != nil {
					close(stop)
					<-done
					t.Fatal(err)
				}
			}
			close(stop)
			check(t, <-done)
			if st := p.Stats(); st.Evictions == 0 {
				t.Log("no eviction happened this run")
			}
			for _, h := range heads {
				check(t, h.Release())
			}
			checkInv(t, p)
		})
	}
}

// readCols40 reads every row of x, a kv state.
func readCols40(x reader) ([][]byte, error) { return readCols(x) }

// TestHostStepEvictedRebuilt: a reconstructable head whose versions
// host steps made, evicted by pressure, is rebuilt by replaying them at
// its next call, reads as before and steps on; in a pool full of
// mandatory state its calls answer ErrNoMemory (a step too) and leave it
// as it was, and once room comes back it reads as before.
func TestHostStepEvictedRebuilt(t *testing.T) {
	for _, be := range hsBackends() {
		for _, verify := range []bool{false, true} {
			t.Run(fmt.Sprint(be.name, verify), func(t *testing.T) {
				p := hsPool(t, be.b(), PoolOptions{BlockBytes: 256, MaxBytes: 40 * 256})
				h := must[*Head](t)(p.NewHead(hsRecL(Reconstructable, 4, 2), "r"))
				defer h.Release()
				cur := readAll(t, h)
				ref := map[Version][][]byte{h.Version(): cloneCols(cur)}
				for i := range 10 {
					in := [][]byte{{byte(i), 1, 2}}
					var f HostStepper = hsRecur{}
					if i%2 == 1 {
						f = hsOwn{}
					}
					check(t, h.StepHostWith(in, verify, f))
					recur(cur, in)
					ref[h.Version()] = cloneCols(cur)
				}
				v := h.Version()
				fill := func() []*Head {
					var ms []*Head
					for i := 0; ; i++ {
						m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), Owner(fmt.Sprint("m", i))))
						ms = append(ms, m)
						if err := m.Append(wideRow(byte(i))); err != nil {
							if !errors.Is(err, ErrNoMemory) {
								t.Fatal(err)
							}
							return ms
						}
					}
				}
				ms := fill()
				if !h.evicted {
					t.Fatalf("the pool filled without evicting the head: %+v", p.Stats())
				}
				// Full: the rebuild finds no room.
				if err := h.StepHostWith([][]byte{{9}}, verify, hsRecur{}); !errors.Is(err, ErrNoMemory) {
					t.Fatalf("a step of an evicted head in a full pool: %v, want ErrNoMemory", err)
				}
				if h.Version() != v {
					t.Fatal("the failed step moved the version")
				}
				for _, m := range ms {
					check(t, m.Release())
				}
				if got := readAll(t, h); !equalCols(got, cur) || h.Version() != v {
					t.Fatal("the rebuilt head reads otherwise than its steps made it")
				}
				if p.Stats().RebuiltBytes == 0 {
					t.Fatal("no rebuild counted")
				}
				for _, w := range h.hist.versions() {
					s := must[*Snap](t)(h.At(w))
					if got := readAll(t, s); !equalCols(got, ref[w]) {
						t.Fatalf("At(%d) of the rebuilt head reads otherwise", w)
					}
					check(t, s.Release())
				}
				// Steps on, then a pool full again while it holds its rows:
				// a step that finds no block answers ErrNoMemory.
				in := [][]byte{{4, 4}}
				check(t, h.StepHostWith(in, verify, hsRecur{}))
				recur(cur, in)
				snap := must[*Snap](t)(h.Snapshot()) // the next step copies every block
				defer snap.Release()
				ms = nil
				for i := 0; ; i++ {
					m := must[*Head](t)(p.NewHead(wide("Session", Mandatory), Owner(fmt.Sprint("n", i))))
					ms = append(ms, m)
					if err := m.Append(wideRow(byte(i))); err != nil {
						break
					}
				}
				v = h.Version()
				before := h.Stats()
				err := h.StepHostWith([][]byte{{5}}, verify, hsRecur{})
				if err == nil {
					recur(cur, [][]byte{{5}})
				} else if !errors.Is(err, ErrNoMemory) {
					t.Fatalf("a step in a full pool: %v", err)
				} else if h.Version() != v || h.Stats().Rows != before.Rows {
					t.Fatal("a step without room changed the head")
				}
				for _, m := range ms {
					check(t, m.Release())
				}
				if got := readAll(t, h); !equalCols(got, cur) {
					t.Fatalf("after the step in a full pool (%v) the head reads otherwise", err)
				}
				checkInv(t, p)
			})
		}
	}
}
