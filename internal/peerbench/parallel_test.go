package peerbench

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// BenchmarkPeerParallel runs each workload as a serving process on
// several cores does: g goroutines (GOMAXPROCS, at least 2) at once, each
// with sessions of its own (their owners and prefix domains told apart),
// the store's all on one pool. One b.N is, for each side in turn, a round
// of every goroutine one after another, then one of each at once. It
// reports per step the process's CPU time of each side at once, their
// ratio (cpu-ratio), and each side's speedup from running its goroutines
// at once (store-scale, peer-scale: the wall time of the rounds one after
// another over that of the rounds at once; g at best), and g.
func BenchmarkPeerParallel(b *testing.B) {
	g := max(runtime.GOMAXPROCS(0), 2)
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			p := newPool(b)
			stores, peers := make([]side, g), make([]side, g)
			for k := range g {
				sz := w.full
				sz.tag = fmt.Sprint("g", k, "-")
				stores[k], peers[k] = w.store(p, sz), w.peer(sz)
			}
			// Warm, as BenchmarkPeer's, at once: the pool then holds the
			// memory of every goroutine's sessions together, which it
			// takes (and the kernel maps) in the first round at once.
			runRounds(stores, 0, true)
			runRounds(peers, 0, true)
			var cpu, seq, par [2]time.Duration
			steps := 0
			b.ResetTimer()
			for i := range b.N {
				for j := range 2 {
					k := j ^ i&1 // each side first in turn
					sides := [][]side{stores, peers}[k]
					s, _, _ := runRounds(sides, uint64(i+1), false)
					t, c, n := runRounds(sides, uint64(i+1), true)
					seq[k], par[k], cpu[k] = seq[k]+s, par[k]+t, cpu[k]+c
					if k == 0 {
						steps += n
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu[0].Nanoseconds())/float64(steps), "store-ns/step")
			b.ReportMetric(float64(cpu[1].Nanoseconds())/float64(steps), "peer-ns/step")
			b.ReportMetric(float64(cpu[0])/float64(max(cpu[1], 1)), "cpu-ratio")
			b.ReportMetric(float64(seq[0])/float64(max(par[0], 1)), "store-scale")
			b.ReportMetric(float64(seq[1])/float64(max(par[1], 1)), "peer-scale")
			b.ReportMetric(float64(g), "goroutines")
		})
	}
}

// runRounds runs a round of each side, one after another or each on a
// goroutine of its own at once, after a collection (untimed, as
// BenchmarkPeer's), and returns the wall time, the process's CPU time
// and the steps.
func runRounds(sides []side, seed uint64, atOnce bool) (wall, cpu time.Duration, steps int) {
	runtime.GC()
	t0, c0 := time.Now(), cpuTime()
	n := make([]int, len(sides))
	if atOnce {
		var wg sync.WaitGroup
		for k, s := range sides {
			wg.Go(func() { n[k], _ = s.round(seed) })
		}
		wg.Wait()
	} else {
		for k, s := range sides {
			n[k], _ = s.round(seed)
		}
	}
	for _, x := range n {
		steps += x
	}
	return time.Since(t0), cpuTime() - c0, steps
}

// TestPeersAgreeAtOnce: sides of every workload on one pool, each with
// its own tag, running at once, read what each reads alone (the checksums
// of a side run alone on a pool of its own), and leave no handle live.
func TestPeersAgreeAtOnce(t *testing.T) {
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			sz := testSizes(w.name)
			want, wantSum := w.store(newPool(t), sz).round(7)
			p := newPool(t)
			const g = 3
			sums := make([]uint64, g)
			steps := make([]int, g)
			var wg sync.WaitGroup
			for k := range g {
				s := sz
				s.tag = fmt.Sprint("g", k, "-")
				side := w.store(p, s)
				wg.Go(func() { steps[k], sums[k] = side.round(7) })
			}
			wg.Wait()
			for k := range g {
				if steps[k] != want || sums[k] != wantSum {
					t.Errorf("goroutine %d: %d steps, checksum %#x; alone: %d steps, checksum %#x", k, steps[k], sums[k], want, wantSum)
				}
			}
			if st := p.Stats(); st.Live != 0 {
				t.Errorf("%d handles live after the rounds", st.Live)
			}
		})
	}
}
