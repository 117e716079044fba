package peerbench

import (
	"runtime"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// TestPeersAgree: on every workload, at small sizes, the store and the
// peer read the same rows over several rounds, so that the benchmark
// compares equal work.
func TestPeersAgree(t *testing.T) {
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			sz := testSizes(w.name)
			p := newPool(t)
			store, peer := w.store(p, sz), w.peer(sz)
			for seed := range uint64(3) {
				n1, s1 := store.round(seed)
				n2, s2 := peer.round(seed)
				if n1 != n2 || s1 != s2 {
					t.Fatalf("round %d: store %d steps, checksum %#x; peer %d steps, checksum %#x", seed, n1, s1, n2, s2)
				}
			}
			if st := p.Stats(); st.Live != 0 {
				t.Errorf("%d handles live after the rounds", st.Live)
			}
		})
	}
}

// testSizes are workload name's sizes for a test: small, but past the
// window, with rewinds before and after it, for (e) and (er).
func testSizes(name string) sizes {
	switch name {
	case "b":
		return sizes{sessions: 5, prompt: 16, steps: 12}
	case "e", "er":
		return sizes{sessions: 2, steps: Window + 3*rewindEvery + 5}
	}
	return sizes{sessions: 3, prompt: 64, steps: 12}
}

func newPool(tb testing.TB) *state.Pool {
	b := device.Host()
	p, err := state.NewPool(b, state.PoolOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Error(err)
		}
		b.Close()
	})
	return p
}

// BenchmarkPeer runs each workload's rounds on the store and on the peer,
// alternated, and reports per step the CPU time of each (the process's,
// garbage collection included, after a collection before each round),
// their ratio, and each side's allocations. One b.N is one round of each
// side.
func BenchmarkPeer(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			p := newPool(b)
			store, peer := w.store(p, w.full), w.peer(w.full)
			store.round(0) // warm: both sides keep their memory
			peer.round(0)
			var storeT, peerT time.Duration
			var storeA, peerA uint64
			steps := 0
			b.ResetTimer()
			for i := range b.N {
				for k, s := range []side{store, peer} {
					if i%2 == 1 {
						s = []side{peer, store}[k]
					}
					// A collection now, untimed, so that neither side's
					// CPU time counts the other's garbage: the process's
					// time includes the collector's workers.
					runtime.GC()
					a0, t0 := mallocs(), cpuTime()
					n, _ := s.round(uint64(i + 1))
					dt, da := cpuTime()-t0, mallocs()-a0
					if s == store {
						storeT, storeA, steps = storeT+dt, storeA+da, steps+n
					} else {
						peerT, peerA = peerT+dt, peerA+da
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(storeT.Nanoseconds())/float64(steps), "store-ns/step")
			b.ReportMetric(float64(peerT.Nanoseconds())/float64(steps), "peer-ns/step")
			b.ReportMetric(float64(storeT)/float64(max(peerT, 1)), "cpu-ratio")
			// The store's time beyond the peer's: the workload's own code
			// (the rows' and the step's arithmetic) runs on both sides of
			// one binary alike, and drops out; the ratio moves with its
			// speed, which code layout alone moved by up to 50% between
			// builds (docs/BENCHMARKS.md).
			b.ReportMetric(float64((storeT-peerT).Nanoseconds())/float64(steps), "excess-ns/step")
			b.ReportMetric(float64(storeA)/float64(steps), "store-allocs/step")
			b.ReportMetric(float64(peerA)/float64(steps), "peer-allocs/step")
		})
	}
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}
