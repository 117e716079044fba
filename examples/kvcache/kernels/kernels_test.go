package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// clangArgs are the flags make ptx compiles kvcache.cu with.
var clangArgs = []string{"-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_80", "-nocudainc", "-nocudalib", "-O2", "-S"}

// TestPTXUpToDate regenerates kvcache.ptx from kvcache.cu and compares.
func TestPTXUpToDate(t *testing.T) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		t.Skip("clang not installed (make ptx installs it): the committed PTX is not checked against its source")
	}
	out := filepath.Join(t.TempDir(), "kvcache.ptx")
	args := append(append([]string(nil), clangArgs...), "-o", out, "kvcache.cu")
	if b, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != PTX {
		t.Errorf("kvcache.ptx is stale: make ptx regenerates it from kvcache.cu")
	}
}

func f32s(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func fromF32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// paged is a field stored in blocks scattered in device memory, with its
// block table.
type paged struct {
	blocks []device.Ptr
	table  device.Ptr
}

func newPaged(t *testing.T, b device.Backend, nblocks, perBlock, width int) paged {
	t.Helper()
	var p paged
	tab := make([]byte, 8*nblocks)
	for i := range nblocks {
		// Blocks in reverse address order: the table, not adjacency,
		// must locate rows.
		blk, err := b.Alloc(4 * perBlock * width)
		if err != nil {
			t.Fatal(err)
		}
		p.blocks = append(p.blocks, blk)
		binary.LittleEndian.PutUint64(tab[8*(nblocks-1-i):], uint64(blk))
	}
	var err error
	if p.table, err = b.Alloc(len(tab)); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyHtoD(p.table, tab); err != nil {
		t.Fatal(err)
	}
	return p
}

// runKernels prefills keys and values through block tables and decodes,
// comparing with attention computed directly in Go.
func runKernels(t *testing.T, b device.Backend) {
	const layers, dim, rows, perBlock = 2, 16, 21, 4
	const width = layers * dim
	set, err := Load(b)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	st, err := b.(device.Streams).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	nblocks := (rows + perBlock - 1) / perBlock
	keys := newPaged(t, b, nblocks, perBlock, width)
	values := newPaged(t, b, nblocks, perBlock, width)
	kv := make([]float32, rows*width)
	vv := make([]float32, rows*width)
	q := make([]float32, width)
	for i := range kv {
		kv[i] = float32(math.Sin(float64(i)))
		vv[i] = float32(math.Cos(float64(3 * i)))
	}
	for i := range q {
		q[i] = float32(i%7) / 7
	}
	stage := func(v []float32) device.Ptr {
		p, err := b.Alloc(4 * len(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CopyHtoD(p, f32s(v)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ks, vs, qp := stage(kv), stage(vv), stage(q)
	outp, _ := b.Alloc(4 * width)
	scratch, _ := b.Alloc(4 * layers * rows)
	// Two prefills per field, the second starting mid-block.
	for _, f := range []struct {
		p   paged
		src device.Ptr
	}{{keys, ks}, {values, vs}} {
		tab := Table{Ptr: f.p.table, RowsPerBlock: perBlock}
		if err := set.Prefill(st, tab, 0, 6, width, f.src); err != nil {
			t.Fatal(err)
		}
		if err := set.Prefill(st, tab, 6, rows-6, width, f.src+device.Ptr(4*6*width)); err != nil {
			t.Fatal(err)
		}
	}
	err = set.Decode(st, DecodeArgs{Keys: keys.table, Values: values.table, RowsPerBlock: perBlock,
		Rows: rows, Layers: layers, Dim: dim, Query: qp, Out: outp, Scratch: scratch})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	// The last block in address order holds rows 0..perBlock-1.
	first := make([]byte, 4*perBlock*width)
	if err := b.CopyDtoH(first, keys.blocks[nblocks-1]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, f32s(kv[:perBlock*width])) {
		t.Error("prefill did not write rows 0.. to the block the table names first")
	}
	got := make([]byte, 4*width)
	if err := b.CopyDtoH(got, outp); err != nil {
		t.Fatal(err)
	}
	out := fromF32s(got)
	scale := 1 / math.Sqrt(dim)
	for l := range layers {
		off := l * dim
		sc := make([]float64, rows)
		m := math.Inf(-1)
		for j := range rows {
			for d := range dim {
				sc[j] += float64(q[off+d]) * float64(kv[j*width+off+d])
			}
			sc[j] *= scale
			m = math.Max(m, sc[j])
		}
		var sum float64
		for j := range sc {
			sc[j] = math.Exp(sc[j] - m)
			sum += sc[j]
		}
		for d := range dim {
			var want float64
			for j := range rows {
				want += sc[j] / sum * float64(vv[j*width+off+d])
			}
			if math.Abs(want-float64(out[off+d])) > 1e-4 {
				t.Fatalf("layer %d, dim %d: decode gave %v, want %v", l, d, out[off+d], want)
			}
		}
	}
}

func TestKernelsHost(t *testing.T) {
	b := device.Host()
	defer b.Close()
	runKernels(t, b)
}

// TestKernelsCUDA runs the PTX on the machine's GPU; make gpu-check runs it
// with GPUSTATE_BACKEND=cuda.
func TestKernelsCUDA(t *testing.T) {
	if os.Getenv("GPUSTATE_BACKEND") != "cuda" {
		t.Skip("GPUSTATE_BACKEND is not cuda: the PTX runs on a GPU under make gpu-check")
	}
	b, err := device.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	runKernels(t, b)
}

func TestLoadWithoutKernels(t *testing.T) {
	if _, err := Load(plain{device.Host()}); err == nil {
		t.Error("Load on a backend without Kernels answered nil")
	}
}

// plain hides the host backend's optional interfaces.
type plain struct{ device.Backend }
