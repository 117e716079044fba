package peerbench
import ("testing";"os";"runtime/pprof";"time")
func TestZZProfile(t *testing.T){
	name := os.Getenv("ZZW")
	for _, w := range workloads {
		if w.name != name { continue }
		p := newPool(t)
		s := w.store(p, w.full); pe := w.peer(w.full)
		s.round(0); pe.round(0)
		f, _ := os.Create("/tmp/zz_" + name + ".prof")
		pprof.StartCPUProfile(f)
		var st, pt time.Duration
		for i := range 30 {
			t0 := time.Now(); s.round(uint64(i+1)); st += time.Since(t0)
			t0 = time.Now(); pe.round(uint64(i+1)); pt += time.Since(t0)
		}
		pprof.StopCPUProfile(); f.Close()
		t.Logf("%s: store %v peer %v ratio %.2f", name, st, pt, float64(st)/float64(pt))
	}
}
