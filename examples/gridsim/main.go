// Command gridsim steps a small heat simulation whose field is kept by
// gpustate with sparse checkpoints, then steps back for debugging: Plan
// shows how a past step would be reconstructed and what it costs, At
// reconstructs it, and the result is checked bit for bit against a
// recomputation from scratch. It then rolls the field back to the
// reconstructed step, steps forward again and checks that the run is
// deterministic, and shows that a step older than the kept window answers
// state.ErrNotRetained. It prints logical and physical bytes and the
// history's memory along the way.
//
// It runs on the CUDA backend where a GPU is present and on the host
// backend elsewhere; GPUSTATE_BACKEND=host|cuda forces one.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/gpustate/gpustate/examples/gridsim/field"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

func main() {
	cfg := config{}
	flag.IntVar(&cfg.steps, "steps", 40, "simulation `steps` to run")
	flag.IntVar(&cfg.back, "back", 30, "the `step` to step back to")
	flag.IntVar(&cfg.old, "old", 2, "a `step` older than the kept window, to show ErrNotRetained")
	flag.Parse()
	if err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "gridsim:", err)
		os.Exit(1)
	}
}

// config sizes the run.
type config struct {
	steps, back, old int
}

func (c config) check() error {
	if c.steps < 1 || c.back < 0 || c.back > c.steps || c.old < 0 || c.old > c.steps {
		return fmt.Errorf("need -steps of at least 1, and -back and -old between 0 and -steps (%d)", c.steps)
	}
	return nil
}

func run(w io.Writer, cfg config) (err error) {
	if err := cfg.check(); err != nil {
		return err
	}
	b, err := device.Open()
	if err != nil {
		return err
	}
	defer b.Close()
	p, err := state.NewPool(b, state.PoolOptions{BlockBytes: 4 << 10})
	if err != nil {
		return err
	}
	defer func() {
		// Close reports every handle still live: a leak is an error.
		if cerr := p.Close(); err == nil {
			err = cerr
		}
	}()
	fmt.Fprintf(w, "gridsim: %s backend, blocks of %s; the field is %dx%d float32 cells, one %d-byte row per grid row (%s a version)\n",
		b.Name(), size(int64(p.Stats().BlockBytes)), side, side, rowBytes, size(cells*4))

	s, err := field.NewFieldState(p, "run-1")
	if err != nil {
		return err
	}
	defer s.Release()
	versions, first, err := simulate(w, b, s, cfg.steps)
	if err != nil {
		return err
	}
	printStats(w, "after the run", s, p)

	snap, back, err := stepBack(w, s, versions, cfg.back)
	if err != nil {
		return err
	}
	defer snap.Release()
	if err := retained(w, s, versions, cfg.old); err != nil {
		return err
	}
	if err := rollBack(w, b, s, snap, back, first, cfg); err != nil {
		return err
	}
	printStats(w, "after the rollback", s, p)

	if err := snap.Release(); err != nil {
		return err
	}
	if err := s.Release(); err != nil {
		return err
	}
	ps := p.Stats()
	fmt.Fprintf(w, "run end: field released; the pool holds %d live handles, %s in use of %s reserved\n",
		ps.Live, size(ps.PhysicalBytes), size(ps.ReservedBytes))
	return nil
}

// simulate runs the given number of steps on the field and returns the
// field's version after each (versions[t] is the version after step t) and
// its cells after the last.
func simulate(w io.Writer, b device.Backend, s *field.FieldState, steps int) ([]state.Version, field.Field, error) {
	versions := []state.Version{s.Version()}
	for t := 1; t <= steps; t++ {
		if err := step(b, s, t); err != nil {
			return nil, field.Field{}, fmt.Errorf("step %d: %w", t, err)
		}
		versions = append(versions, s.Version())
	}
	last, err := s.Read(0, side)
	if err != nil {
		return nil, field.Field{}, err
	}
	fmt.Fprintf(w, "stepped %d times by the diffusion kernel, writing in place through WriteDevice: version %d, mean temperature %.3f\n",
		steps, s.Version(), mean(last.Cells))
	return versions, last, nil
}

// stepBack shows how step back would be reconstructed and what it costs
// (Plan), reconstructs it (At) and checks it bit for bit against a
// recomputation from scratch. It returns the snapshot of that step and its
// cells.
func stepBack(w io.Writer, s *field.FieldState, versions []state.Version, back int) (*field.FieldSnapshot, field.Field, error) {
	pl, err := s.Plan(versions[back])
	if err != nil {
		return nil, field.Field{}, fmt.Errorf("Plan(step %d): %w", back, err)
	}
	fmt.Fprintf(w, "step back to step %d (version %d):\n", back, pl.Target)
	fmt.Fprintf(w, "  Plan: seed from the checkpoint of step %d, apply %d deltas (%s copied from the checkpoint, %s of deltas, %d copies, %d blocks): estimated %v\n",
		stepOf(versions, pl.Checkpoint), pl.Deltas, size(pl.SeedBytes), size(pl.DeltaBytes), pl.Copies, pl.Blocks, pl.Estimate)
	for _, a := range pl.Alternatives {
		fmt.Fprintf(w, "    alternative: the checkpoint of step %d, %d deltas: estimated %v\n", stepOf(versions, a.Checkpoint), a.Deltas, a.Estimate)
	}
	start := time.Now()
	snap, err := s.At(versions[back])
	took := time.Since(start)
	if err != nil {
		return nil, field.Field{}, fmt.Errorf("At(step %d): %w", back, err)
	}
	got, err := snap.Read(0, side)
	if err == nil {
		if i := firstDiff(got.Cells, recompute(back)); i >= 0 {
			err = fmt.Errorf("At(step %d): cell %d differs from the recomputation", back, i)
		}
	}
	if err != nil {
		snap.Release()
		return nil, field.Field{}, err
	}
	fmt.Fprintf(w, "  At: the call took %v; the snapshot is identical to the field recomputed from scratch (%d steps), bit for bit\n", took.Round(time.Microsecond), back)
	return snap, got, nil
}

// retained checks that every step the head retains reconstructs exactly
// and that older ones answer ErrNotRetained, then shows what At answers
// for step old.
func retained(w io.Writer, s *field.FieldState, versions []state.Version, old int) error {
	var kept, lost []int
	for t, v := range versions {
		r, err := s.At(v)
		switch {
		case errors.Is(err, state.ErrNotRetained):
			lost = append(lost, t)
			continue
		case err != nil:
			return fmt.Errorf("At(step %d): %w", t, err)
		}
		f, err := r.Read(0, side)
		r.Release()
		if err != nil {
			return err
		}
		if i := firstDiff(f.Cells, recompute(t)); i >= 0 {
			return fmt.Errorf("At(step %d): cell %d differs from the recomputation", t, i)
		}
		kept = append(kept, t)
	}
	if len(lost) == 0 {
		fmt.Fprintf(w, "  retained: steps %s reconstruct bit for bit: the whole run is still kept\n", span(kept))
	} else {
		fmt.Fprintf(w, "  retained: steps %s reconstruct bit for bit; steps %s answer state.ErrNotRetained\n", span(kept), span(lost))
	}
	switch r, err := s.At(versions[old]); {
	case errors.Is(err, state.ErrNotRetained):
		fmt.Fprintf(w, "  At(step %d): %v\n", old, err)
	case err != nil:
		return fmt.Errorf("At(step %d): %w", old, err)
	default:
		fmt.Fprintf(w, "  At(step %d): still retained\n", old)
		return r.Release()
	}
	return nil
}

// rollBack rolls the field back to snap, the reconstructed step cfg.back
// whose cells are back, steps forward again to cfg.steps and checks that
// the field comes out as first, the cells of the first run.
func rollBack(w io.Writer, b device.Backend, s *field.FieldState, snap *field.FieldSnapshot, back, first field.Field, cfg config) error {
	if err := s.Rollback(snap); err != nil {
		return fmt.Errorf("Rollback to step %d: %w", cfg.back, err)
	}
	now, err := s.Read(0, side)
	if err != nil {
		return err
	}
	if i := firstDiff(now.Cells, back.Cells); i >= 0 {
		return fmt.Errorf("after Rollback, cell %d differs from step %d", i, cfg.back)
	}
	fmt.Fprintf(w, "rollback: At then Rollback put the head back at step %d (version %d)\n", cfg.back, s.Version())
	for t := cfg.back + 1; t <= cfg.steps; t++ {
		if err := step(b, s, t); err != nil {
			return fmt.Errorf("step %d again: %w", t, err)
		}
	}
	again, err := s.Read(0, side)
	if err != nil {
		return err
	}
	if i := firstDiff(again.Cells, first.Cells); i >= 0 {
		return fmt.Errorf("stepping again from step %d: cell %d differs from the first run", cfg.back, i)
	}
	fmt.Fprintf(w, "  re-stepped %d..%d: version %d, identical to the first run bit for bit (the simulation is deterministic)\n",
		cfg.back+1, cfg.steps, s.Version())
	return nil
}

// stepOf returns the step whose version is v, or -1.
func stepOf(versions []state.Version, v state.Version) int { return slices.Index(versions, v) }

// printStats prints the head's and the pool's logical and physical bytes
// and the history's memory.
func printStats(w io.Writer, when string, s *field.FieldState, p *state.Pool) {
	st, ps := s.Stats(), p.Stats()
	fmt.Fprintf(w, "  %s: head logical %s, physical %s; history: %d checkpoints, %s of deltas; pool: logical %s, physical %s (history %s), reserved %s\n",
		when, size(st.LogicalBytes), size(st.PhysicalBytes), st.Checkpoints, size(st.HistoryBytes),
		size(ps.LogicalBytes), size(ps.PhysicalBytes), size(ps.HistoryBytes), size(ps.ReservedBytes))
}

// firstDiff returns the first index where a and b differ bit for bit, or
// -1.
func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func mean(xs []float32) float64 {
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s / float64(len(xs))
}

// span writes ascending steps as ranges: "9..40", "none".
func span(ts []int) string {
	if len(ts) == 0 {
		return "none"
	}
	out := ""
	for i := 0; i < len(ts); {
		j := i
		for j+1 < len(ts) && ts[j+1] == ts[j]+1 {
			j++
		}
		if out != "" {
			out += ", "
		}
		if j == i {
			out += fmt.Sprint(ts[i])
		} else {
			out += fmt.Sprintf("%d..%d", ts[i], ts[j])
		}
		i = j + 1
	}
	return out
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
