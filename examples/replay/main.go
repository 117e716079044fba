// Command replay trains a small learner from an experience replay buffer
// kept by gpustate: a window state that keeps the last buffer.Window
// transitions, from which the learner samples minibatches with ReadRows.
// The same run is replayed on a plain Go ring buffer, and the two must
// agree sample for sample. It shows that row indices stay stable, that rows
// that left the window answer state.ErrExpired, that the memory held stays
// flat while the buffer grows without limit, and that a snapshot keeps its
// own window.
//
// It runs on the CUDA backend where a GPU is present and on the host
// backend elsewhere; GPUSTATE_BACKEND=host|cuda forces one.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/gpustate/gpustate/examples/replay/buffer"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

func main() {
	cfg := config{}
	flag.IntVar(&cfg.steps, "steps", 3000, "environment `steps` to run")
	flag.IntVar(&cfg.batch, "batch", 32, "transitions per `minibatch`")
	flag.Parse()
	if err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

type config struct{ steps, batch int }

// arms are the mean rewards of the bandit's four actions.
var arms = [4]float32{0.1, 0.8, 0.3, 0.5}

// learner is what both runs compute: action values learned from sampled
// minibatches, and the samples themselves, to compare.
type learner struct {
	q       [4]float32
	rng     *rand.Rand // the environment and the agent
	sampler *rand.Rand // the minibatch indices
	seen    []float32  // every sampled reward, in order
}

func newLearner() *learner {
	return &learner{rng: rand.New(rand.NewPCG(1, 2)), sampler: rand.New(rand.NewPCG(3, 4))}
}

// act takes one step in the environment: an epsilon-greedy action on q.
func (l *learner) act() buffer.Transition {
	obs := []float32{l.rng.Float32(), l.rng.Float32(), l.rng.Float32(), l.rng.Float32()}
	a := int32(l.rng.IntN(4))
	if l.rng.Float32() > 0.2 {
		a = int32(argmax(l.q))
	}
	r := arms[a] + 0.1*(l.rng.Float32()-0.5)
	return buffer.Transition{Obs: obs, Action: []int32{a}, Reward: []float32{r}}
}

// indices samples n row indices of [oldest, end).
func (l *learner) indices(oldest, end, n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = oldest + l.sampler.IntN(end-oldest)
	}
	return idx
}

// learn moves q towards the rewards of a minibatch.
func (l *learner) learn(b buffer.Transition) {
	for i, a := range b.Action {
		l.q[a] += 0.05 * (b.Reward[i] - l.q[a])
		l.seen = append(l.seen, b.Reward[i])
	}
}

func argmax(q [4]float32) int {
	best := 0
	for i := range q {
		if q[i] > q[best] {
			best = i
		}
	}
	return best
}

func run(w io.Writer, cfg config) (err error) {
	if cfg.steps < 2*buffer.Window || cfg.batch < 1 || cfg.batch > buffer.Window {
		return fmt.Errorf("need -steps of at least %d and a -batch between 1 and %d", 2*buffer.Window, buffer.Window)
	}
	b, err := device.Open()
	if err != nil {
		return err
	}
	defer b.Close()
	p, err := state.NewPool(b, state.PoolOptions{BlockBytes: 1 << 10})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := p.Close(); err == nil {
			err = cerr
		}
	}()
	fmt.Fprintf(w, "replay: %s backend; a window of %d transitions, %d to a block\n", b.Name(), buffer.Window, buffer.BlockRows)
	s, err := buffer.NewTransitionState(p, "learner-1")
	if err != nil {
		return err
	}
	defer s.Release()
	l, snap, err := train(w, s, cfg)
	if err != nil {
		return err
	}
	defer snap.Release()
	ref := reference(cfg)
	if !slices.Equal(l.seen, ref.seen) || l.q != ref.q {
		return fmt.Errorf("the store's minibatches differ from the plain ring buffer's")
	}
	fmt.Fprintf(w, "learned action values %.2f (best action %d); %d sampled rewards identical to a plain Go ring buffer's, sample for sample\n",
		l.q, argmax(l.q), len(l.seen))
	if err := expiry(w, s, snap); err != nil {
		return err
	}
	if err := snap.Release(); err != nil {
		return err
	}
	if err := s.Release(); err != nil {
		return err
	}
	fmt.Fprintf(w, "released: the pool holds %d live handles\n", p.Stats().Live)
	return nil
}

// train runs the learner on the store, taking a snapshot at step
// 2*Window, and checks that the memory held stops growing after the
// first windows.
func train(w io.Writer, s *buffer.TransitionState, cfg config) (*learner, *buffer.TransitionSnapshot, error) {
	l := newLearner()
	// The most physical bytes held in steps (Window, 2*Window], and after.
	early, err := l.steps(s, cfg, 2*buffer.Window)
	if err != nil {
		return nil, nil, err
	}
	snap, err := s.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	late, err := l.steps(s, cfg, cfg.steps)
	if err != nil {
		snap.Release()
		return nil, nil, err
	}
	st := s.Stats()
	fmt.Fprintf(w, "after %d steps: Len %d, readable rows [%d, %d), logical %d bytes, physical %d bytes\n",
		cfg.steps, s.Len(), s.Oldest(), s.Len(), st.LogicalBytes, st.PhysicalBytes)
	if late > early {
		snap.Release()
		return nil, nil, fmt.Errorf("the buffer held at most %d bytes in steps %d..%d, but %d later", early, buffer.Window+1, 2*buffer.Window, late)
	}
	fmt.Fprintf(w, "memory held stays flat: at most %d physical bytes from step %d on, while Len grew to %d\n", early, buffer.Window+1, s.Len())
	return l, snap, nil
}

// steps runs the learner until s holds end rows: one append per step, and
// one minibatch per step once the buffer holds a batch. It returns the most
// physical bytes s held after a step past the first window.
func (l *learner) steps(s *buffer.TransitionState, cfg config, end int) (int64, error) {
	var most int64
	var mb buffer.Transition // one minibatch, gathered into again and again
	for s.Len() < end {
		if err := s.Append(l.act()); err != nil {
			return 0, err
		}
		if s.Len() >= cfg.batch {
			if err := s.ReadRowsInto(&mb, l.indices(s.Oldest(), s.Len(), cfg.batch)); err != nil {
				return 0, err
			}
			l.learn(mb)
		}
		if s.Len() > buffer.Window {
			most = max(most, s.Stats().PhysicalBytes)
		}
	}
	return most, nil
}

// reference runs the same learner on a plain Go ring buffer.
func reference(cfg config) *learner {
	l := newLearner()
	var ring []buffer.Transition
	for n := 1; n <= cfg.steps; n++ {
		ring = append(ring, l.act())
		oldest := max(0, n-buffer.Window)
		if n >= cfg.batch {
			var mb buffer.Transition
			for _, i := range l.indices(oldest, n, cfg.batch) {
				t := ring[i]
				mb.Action = append(mb.Action, t.Action...)
				mb.Reward = append(mb.Reward, t.Reward...)
			}
			l.learn(mb)
		}
	}
	return l
}

// expiry shows the stable indices: an old row answers state.ErrExpired on
// the head, and the snapshot still reads its own window.
func expiry(w io.Writer, s *buffer.TransitionState, snap *buffer.TransitionSnapshot) error {
	_, err := s.Read(0, 1)
	if !errors.Is(err, state.ErrExpired) {
		return fmt.Errorf("row 0 read with %v, want state.ErrExpired", err)
	}
	fmt.Fprintf(w, "Read(0, 1): %v\n", err)
	var last buffer.Transition
	if err := s.ReadInto(&last, s.Len()-4, s.Len()); err != nil {
		return err
	}
	fmt.Fprintf(w, "ReadInto: the last 4 actions %v\n", last.Action)
	// The rewards alone: ReadFields copies the fields dst holds, no others.
	rewards := buffer.Transition{Reward: make([]float32, 0, 4)}
	if err := s.ReadFields(&rewards, s.Len()-4, s.Len()); err != nil {
		return err
	}
	fmt.Fprintf(w, "ReadFields: the last 4 rewards %.2f, and no observations (%d read)\n", rewards.Reward, len(rewards.Obs))
	old, err := snap.ReadRows([]int{snap.Oldest(), snap.Len() - 1})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "the snapshot taken at step %d still reads its window [%d, %d): rewards %.2f at its ends\n",
		snap.Len(), snap.Oldest(), snap.Len(), old.Reward)
	return nil
}
