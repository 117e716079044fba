package stcleanup_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkVetStateHeavy times go vet -vettool=statevet against go vet
// -lostcancel (the vet driver's floor: one cheap CFG analyzer) on a
// generated module full of state types and their users, where the dataflow
// analyzers do real work on every function. Both start from the same warm
// build cache (every package and test variant compiled, nothing vetted) and
// no cached vet results: each run gets a fresh copy of the cache. Runs
// alternate; the reported figure is the ratio of the total times.
//
//	go test -run '^$' -bench VetStateHeavy -benchtime 3x ./analyzers/stcleanup
func BenchmarkVetStateHeavy(b *testing.B) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		b.Skip("no go command")
	}
	dir := b.TempDir()
	root, err := exec.Command(goCmd, "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		b.Fatal(err)
	}
	statevet := filepath.Join(dir, "statevet")
	build := exec.Command(goCmd, "build", "-o", statevet, "./cmd/statevet")
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building statevet: %v\n%s", err, out)
	}
	mod := filepath.Join(dir, "mod")
	nfuncs, err := writeStateModule(mod, 24, 12)
	if err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	warm := filepath.Join(dir, "warm")
	goRun := func(cache string, args ...string) (string, time.Duration, error) {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = mod
		cmd.Env = append(env, "GOCACHE="+cache)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		return string(out), time.Since(t0), err
	}
	if out, _, err := goRun(warm, "list", "-export", "-deps", "-test", "./..."); err != nil {
		b.Fatalf("warming the cache: %v\n%s", err, out)
	}
	fresh := func() string {
		c := filepath.Join(dir, "cache")
		os.RemoveAll(c)
		if out, err := exec.Command("cp", "-a", warm, c).CombinedOutput(); err != nil {
			b.Fatalf("copying the cache: %v\n%s", err, out)
		}
		return c
	}
	var sv, lc time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 2 {
			b.StopTimer()
			c := fresh()
			b.StartTimer()
			if (i+j)%2 == 0 {
				out, d, _ := goRun(c, "vet", "-vettool="+statevet, "./...")
				if findings(out, "leaky/leaky.go:") != 3 || findings(out, ".go:") != 3 {
					b.Fatalf("statevet on the state-heavy module: want the 3 findings of package leaky, got:\n%s", out)
				}
				sv += d
			} else {
				out, d, err := goRun(c, "vet", "-lostcancel", "./...")
				if err != nil {
					b.Fatalf("go vet -lostcancel: %v\n%s", err, out)
				}
				lc += d
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(sv.Seconds()/float64(b.N), "statevet-s/op")
	b.ReportMetric(lc.Seconds()/float64(b.N), "lostcancel-s/op")
	b.ReportMetric(sv.Seconds()/lc.Seconds(), "statevet/lostcancel")
	b.ReportMetric(float64(nfuncs), "funcs")
}

// findings counts the diagnostics (not their related lines, which vet
// prints indented by a tab after the position) in vet's output whose
// position contains pos.
func findings(out, pos string) int {
	n := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, pos) && !strings.Contains(line, ": \t") {
			n++
		}
	}
	return n
}

// writeStateModule writes a module with ntypes state types (handles,
// snapshots and views, with the directives stategen writes) in package res
// and nusers packages that use every type the ways users do: acquire,
// check the error, defer the release, append in loops, snapshot, read
// views, branch, hand a branch to a helper, wrap acquires. It returns the
// number of user functions.
func writeStateModule(dir string, ntypes, nusers int) (int, error) {
	files := map[string]string{"go.mod": "module statebench\n\ngo 1.26\n"}
	var res strings.Builder
	res.WriteString(resHeader)
	for i := range ntypes {
		fmt.Fprintf(&res, resType, i)
	}
	files["res/res.go"] = res.String()
	nfuncs := 0
	for u := range nusers {
		var w strings.Builder
		fmt.Fprintf(&w, "// Package u%d uses the state types.\npackage u%d\n\nimport (\n\t\"errors\"\n\t\"sort\"\n\n\t\"statebench/res\"\n)\n\nvar _ = errors.New\nvar _ = sort.Ints\n", u, u)
		for i := range ntypes {
			nfuncs += 6
			fmt.Fprintf(&w, userFuncs, i)
		}
		files[fmt.Sprintf("u%d/u%d.go", u, u)] = w.String()
	}
	// Three mistakes, so that the run shows the analyzers at work.
	files["leaky/leaky.go"] = leakySource
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return 0, err
		}
	}
	return nfuncs, nil
}

// resHeader starts package res: the pool, with its directives.
const resHeader = `// Package res declares state handles the way stategen writes them.
package res

import "errors"

// ErrReleased is returned by calls on a released handle.
var ErrReleased = errors.New("released")

// Span locates rows in device memory.
type Span struct {
	Ptr  uint64
	Rows int
}

// Pool owns device memory.
type Pool struct{ live int }

// NewPool returns a pool to close.
//
//state:acquire
func NewPool() (*Pool, error) { return &Pool{}, nil }

// Close releases the pool.
//
//state:release
func (p *Pool) Close() error { return nil }
`

// resType is one state type of package res (%[1]d: its number): the
// handle, its snapshot and their methods, with the directives stategen
// writes.
const resType = `
// T%[1]dState is a state head.
type T%[1]dState struct {
	p    *Pool
	rows []float32
	done bool
}

// NewT%[1]dState returns a head the caller must release.
//
//state:acquire
func NewT%[1]dState(p *Pool) (*T%[1]dState, error) {
	if p == nil {
		return nil, errors.New("nil pool")
	}
	p.live++
	return &T%[1]dState{p: p}, nil
}

// Append adds rows.
//
//state:appends
func (s *T%[1]dState) Append(rows []float32) error {
	if s.done {
		return ErrReleased
	}
	s.rows = append(s.rows, rows...)
	return nil
}

// Len is the number of rows.
func (s *T%[1]dState) Len() int { return len(s.rows) }

// Snapshot returns an immutable snapshot.
//
//state:acquire
func (s *T%[1]dState) Snapshot() (*T%[1]dSnapshot, error) {
	return &T%[1]dSnapshot{rows: s.rows[:len(s.rows):len(s.rows)]}, nil
}

// Branch returns a new head.
//
//state:acquire
func (s *T%[1]dState) Branch() (*T%[1]dState, error) {
	return &T%[1]dState{p: s.p, rows: s.rows[:len(s.rows):len(s.rows)]}, nil
}

// Release releases the head.
//
//state:release
func (s *T%[1]dState) Release() error {
	s.done = true
	return nil
}

// T%[1]dSnapshot is an immutable snapshot.
//
//state:snapshot
type T%[1]dSnapshot struct{ rows []float32 }

// Rows aliases the snapshot's rows.
//
//state:view
func (v *T%[1]dSnapshot) Rows() []float32 { return v.rows }

// Spans locates the snapshot's rows.
//
//state:view
func (v *T%[1]dSnapshot) Spans(from, to int) ([]Span, error) {
	return []Span{{Rows: to - from}}, nil
}

// Len is the number of rows.
func (v *T%[1]dSnapshot) Len() int { return len(v.rows) }

// Release releases the snapshot.
//
//state:release
func (v *T%[1]dSnapshot) Release() error { return nil }
`

// userFuncs are the functions of a user package that use state type
// %[1]d: six of them.
const userFuncs = `
func open%[1]d(p *res.Pool) (*res.T%[1]dState, error) {
	s, err := res.NewT%[1]dState(p)
	if err != nil {
		return nil, err
	}
	if err := s.Append(make([]float32, 4)); err != nil {
		s.Release()
		return nil, err
	}
	return s, nil
}

func drop%[1]d(s *res.T%[1]dState) {
	if s != nil {
		s.Release()
	}
}

// Step%[1]d appends, snapshots and reads a state of type %[1]d.
func Step%[1]d(p *res.Pool, batch []float32, n int) (float32, error) {
	s, err := open%[1]d(p)
	if err != nil {
		return 0, err
	}
	defer s.Release()
	for i := 0; i < n; i++ {
		if err := s.Append(batch); err != nil {
			return 0, err
		}
	}
	v, err := s.Snapshot()
	if err != nil {
		return 0, err
	}
	defer v.Release()
	var sum float32
	for _, x := range v.Rows() {
		sum += x
	}
	spans, err := v.Spans(0, v.Len())
	if err != nil {
		return 0, err
	}
	rows := 0
	for _, sp := range spans {
		rows += sp.Rows
	}
	if rows != v.Len() {
		return 0, errors.New("short")
	}
	return sum, nil
}

// Fork%[1]d branches and hands the branch to a helper or returns it.
func Fork%[1]d(s *res.T%[1]dState, keep bool) (*res.T%[1]dState, error) {
	b, err := s.Branch()
	if err != nil {
		return nil, err
	}
	switch {
	case keep:
		return b, nil
	case b.Len() == 0:
		drop%[1]d(b)
		return nil, nil
	}
	defer drop%[1]d(b)
	return nil, b.Append([]float32{1})
}

// Loop%[1]d opens and releases in a loop, with labeled control flow.
func Loop%[1]d(p *res.Pool, n int) (total int) {
outer:
	for i := 0; i < n; i++ {
		s, err := res.NewT%[1]dState(p)
		if err != nil {
			continue
		}
		for j := range i {
			if err := s.Append([]float32{float32(j)}); err != nil {
				s.Release()
				break outer
			}
		}
		total += s.Len()
		s.Release()
	}
	return total
}

// Sorted%[1]d copies a snapshot's rows before sorting them.
func Sorted%[1]d(v *res.T%[1]dSnapshot) []int {
	rows := v.Rows()
	out := make([]int, len(rows))
	for i, x := range rows {
		out[i] = int(x)
	}
	sort.Ints(out)
	go func() {
		_ = v.Len()
	}()
	return out
}
`

// leakySource is package leaky: one mistake per dataflow analyzer, so that
// the run shows the analyzers at work.
const leakySource = `// Package leaky holds one mistake per dataflow analyzer.
package leaky

import "statebench/res"

func Leak(p *res.Pool) error {
	s, err := res.NewT0State(p)
	if err != nil {
		return err
	}
	return s.Append(nil)
}

func UseAfterRelease(s *res.T0State) int {
	s.Release()
	return s.Len()
}

func WriteSnapshot(v *res.T0Snapshot) {
	v.Rows()[0] = 1
}
`
