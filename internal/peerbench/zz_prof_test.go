package peerbench

import (
	"os"
	"syscall"
	"testing"
)

func minflt() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(0, &ru)
	return ru.Minflt
}

func BenchmarkSide(b *testing.B) {
	name, which := os.Getenv("W"), os.Getenv("SIDE")
	for _, w := range workloads {
		if w.name != name {
			continue
		}
		p := newPool(b)
		var s side
		if which == "peer" {
			s = w.peer(w.full)
		} else {
			s = w.store(p, w.full)
		}
		s.round(0)
		s.round(1)
		f0 := minflt()
		b.ResetTimer()
		for i := range b.N {
			s.round(uint64(i + 1))
		}
		b.ReportMetric(float64(minflt()-f0)/float64(b.N), "faults/round")
	}
}

