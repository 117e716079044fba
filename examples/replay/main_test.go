package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/examples/replay/buffer"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

func TestRun(t *testing.T) {
	t.Setenv("GPUSTATE_BACKEND", "host")
	var out bytes.Buffer
	if err := run(&out, config{steps: 3000, batch: 32}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"after 3000 steps: Len 3000, readable rows [2488, 3000), logical 12288 bytes",
		"memory held stays flat: at most 13824 physical bytes from step 513 on, while Len grew to 3000",
		"best action 1",
		"identical to a plain Go ring buffer's, sample for sample",
		"Read(0, 1): state: Transition.Read: rows [0, 1): rows below 2488 left the window of 512 rows: state: rows expired from the window",
		"ReadFields: the last 4 rewards",
		"and no observations (0 read)",
		"the snapshot taken at step 1024 still reads its window [512, 1024)",
		"the pool holds 0 live handles",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadConfig(t *testing.T) {
	if err := run(&bytes.Buffer{}, config{steps: 10, batch: 4}); err == nil {
		t.Error("a run shorter than the window was accepted")
	}
}

// filled returns a buffer holding rows transitions.
func filled(t testing.TB, rows int) *buffer.TransitionState {
	p, err := state.NewPool(device.Host(), state.PoolOptions{BlockBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	s, err := buffer.NewTransitionState(p, "bench")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release(); p.Close() })
	l := newLearner()
	for range rows {
		if err := s.Append(l.act()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestReadIntoAllocs checks that ReadInto into a batch large enough
// allocates nothing, and that a failed one leaves the batch as it was.
func TestReadIntoAllocs(t *testing.T) {
	s := filled(t, 2*buffer.Window)
	var dst buffer.Transition
	if err := s.ReadInto(&dst, s.Len()-32, s.Len()); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.ReadInto(&dst, s.Len()-32, s.Len()) }); n != 0 {
		t.Errorf("ReadInto allocates %v times a call", n)
	}
	if err := s.ReadInto(&dst, 0, 8); err == nil || len(dst.Action) != 32 {
		t.Errorf("ReadInto of expired rows: %v, batch of %d rows; want an error and the batch as it was", err, len(dst.Action))
	}
}

// BenchmarkReadInto reads the latest minibatch into one batch: 0
// allocs/op; BenchmarkRead allocates a new batch each time.
func BenchmarkReadInto(b *testing.B) {
	s := filled(b, 2*buffer.Window)
	var dst buffer.Transition
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ReadInto(&dst, s.Len()-32, s.Len()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	s := filled(b, 2*buffer.Window)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Read(s.Len()-32, s.Len()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadRows gathers a sampled minibatch of 32.
func BenchmarkReadRows(b *testing.B) {
	s := filled(b, 2*buffer.Window)
	l := newLearner()
	idx := l.indices(s.Oldest(), s.Len(), 32)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.ReadRows(idx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadRowsIntoAllocs checks that a gather into a batch large enough
// allocates nothing, that it reads what ReadRows reads, and that a failed
// one (an expired index) leaves the batch as it was.
func TestReadRowsIntoAllocs(t *testing.T) {
	s := filled(t, 2*buffer.Window)
	idx := newLearner().indices(s.Oldest(), s.Len(), 32)
	want, err := s.ReadRows(idx)
	if err != nil {
		t.Fatal(err)
	}
	var dst buffer.Transition
	if err := s.ReadRowsInto(&dst, idx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dst.Reward, want.Reward) || !slices.Equal(dst.Obs, want.Obs) || !slices.Equal(dst.Action, want.Action) {
		t.Errorf("ReadRowsInto read other rows than ReadRows")
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.ReadRowsInto(&dst, idx) }); n != 0 {
		t.Errorf("ReadRowsInto allocates %v times a call", n)
	}
	if err := s.ReadRowsInto(&dst, []int{0}); !errors.Is(err, state.ErrExpired) || len(dst.Action) != 32 {
		t.Errorf("ReadRowsInto of an expired row: %v, batch of %d rows; want state.ErrExpired and the batch as it was", err, len(dst.Action))
	}
	if err := s.ReadRowsInto(nil, idx); !errors.Is(err, state.ErrShape) {
		t.Errorf("ReadRowsInto into nil: %v, want state.ErrShape", err)
	}
	var none *buffer.TransitionState
	if err := none.ReadRowsInto(&dst, idx); !errors.Is(err, state.ErrReleased) {
		t.Errorf("ReadRowsInto on a nil state: %v, want state.ErrReleased", err)
	}
}

// TestReadFieldsReadsOneField checks that ReadFields fills the fields it
// is given, leaves the nil ones nil, allocates nothing once they are large
// enough, and leaves dst as it was when it fails.
func TestReadFieldsReadsOneField(t *testing.T) {
	s := filled(t, 2*buffer.Window)
	from, to := s.Len()-32, s.Len()
	want, err := s.Read(from, to)
	if err != nil {
		t.Fatal(err)
	}
	dst := buffer.Transition{Reward: make([]float32, 0, 32)}
	if err := s.ReadFields(&dst, from, to); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dst.Reward, want.Reward) || dst.Obs != nil || dst.Action != nil {
		t.Errorf("ReadFields of the rewards: rewards equal %v, obs %v, actions %v; want the rewards alone",
			slices.Equal(dst.Reward, want.Reward), dst.Obs, dst.Action)
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.ReadFields(&dst, from, to) }); n != 0 {
		t.Errorf("ReadFields allocates %v times a call", n)
	}
	if err := s.ReadFields(&dst, 0, 8); !errors.Is(err, state.ErrExpired) || len(dst.Reward) != 32 {
		t.Errorf("ReadFields of expired rows: %v, %d rewards; want state.ErrExpired and dst as it was", err, len(dst.Reward))
	}
	if err := s.ReadFields(&dst, to, to+1); !errors.Is(err, state.ErrRange) || len(dst.Reward) != 32 {
		t.Errorf("ReadFields past Len: %v, %d rewards; want state.ErrRange and dst as it was", err, len(dst.Reward))
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	obs := buffer.Transition{Obs: []float32{}}
	if err := snap.ReadFields(&obs, from, to); err != nil || !slices.Equal(obs.Obs, want.Obs) || obs.Reward != nil {
		t.Errorf("snapshot ReadFields of the observations: %v, equal %v, rewards %v", err, slices.Equal(obs.Obs, want.Obs), obs.Reward)
	}
}
