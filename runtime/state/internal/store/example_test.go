package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/store"
)

// A pool cut into blocks of 256 bytes, holding one head of 64-byte rows:
// four rows take a block, and a snapshot shares them.
func ExampleNewPool() {
	p, err := store.NewPool(device.Host(), store.PoolOptions{BlockBytes: 256})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	l := &store.Layout{Type: "Row", Columns: []store.Column{{Name: "V", ElemSize: 8, Width: 8}}, Growth: store.Append}
	h, err := p.NewHead(l, "session-1")
	if err != nil {
		panic(err)
	}
	defer h.Release()
	if err := h.Append([][]byte{bytes.Repeat([]byte{1}, 4*64)}); err != nil {
		panic(err)
	}
	snap, err := h.Snapshot()
	if err != nil {
		panic(err)
	}
	defer snap.Release()
	st := p.Stats()
	fmt.Printf("%d live handles: logical %d bytes, physical %d (the snapshot shares the head's block)\n",
		st.Live, st.LogicalBytes, st.PhysicalBytes)
	// Output:
	// 2 live handles: logical 512 bytes, physical 256 (the snapshot shares the head's block)
}

// prompt is a layout whose whole blocks (4 rows) are shared by prefix
// across the heads of one domain, keyed by the token column.
var prompt = &store.Layout{
	Type:      "Prompt",
	Columns:   []store.Column{{Name: "KV", ElemSize: 4, Width: 8}, {Name: "Token", ElemSize: 4, Width: 1}},
	Growth:    store.Append,
	Bound:     64,
	BlockRows: 4,
	ShareKey:  "Token",
}

// promptRows returns the rows of tokens: a vector per token and the token.
func promptRows(toks ...uint32) [][]byte {
	var kv, tok []byte
	for _, t := range toks {
		for j := range 8 {
			kv = binary.LittleEndian.AppendUint32(kv, t*8+uint32(j))
		}
		tok = binary.LittleEndian.AppendUint32(tok, t)
	}
	return [][]byte{kv, tok}
}

// Sessions of one domain share a prompt's whole blocks: the second adopts
// the rows the first computed, and the pool holds them once.
func ExamplePool_NewSharedHead() {
	p, err := store.NewPool(device.Host(), store.PoolOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	system := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	a, err := p.NewSharedHead(prompt, "session-a", "tenant")
	if err != nil {
		panic(err)
	}
	defer a.Release()
	if err := a.Append(promptRows(system...)); err != nil {
		panic(err)
	}
	b, err := p.NewSharedHead(prompt, "session-b", "tenant")
	if err != nil {
		panic(err)
	}
	defer b.Release()
	n, err := b.AdoptPrefix(promptRows(system...)[1])
	if err != nil {
		panic(err)
	}
	// The caller computes and appends only the rows past the adopted ones.
	if err := b.Append(promptRows(system[n:]...)); err != nil {
		panic(err)
	}
	st := p.Stats()
	fmt.Printf("session b adopted %d of %d rows; prefix lookups %d, hits %d, rows adopted %d\n",
		n, len(system), st.AdoptCalls, st.AdoptHits, st.AdoptedRows)
	// Output:
	// session b adopted 8 of 10 rows; prefix lookups 1, hits 1, rows adopted 8
}

// Under MaxBytes, a write that finds no room evicts optional state, least
// recently used first: the evicted head answers store.ErrEvicted, and its
// Release still succeeds.
func ExamplePool_eviction() {
	p, err := store.NewPool(device.Host(), store.PoolOptions{BlockBytes: 256, MaxBytes: 2 * 256})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	layout := func(r store.Retention) *store.Layout {
		return &store.Layout{Type: "Cache", Columns: []store.Column{{Name: "Row", ElemSize: 8, Width: 32}}, Retention: r}
	}
	row := [][]byte{bytes.Repeat([]byte{7}, 256)}
	var caches []*store.Head
	for _, owner := range []store.Owner{"cache-0", "cache-1"} {
		h, err := p.NewHead(layout(store.Optional), owner)
		if err != nil {
			panic(err)
		}
		defer h.Release()
		if err := h.Append(row); err != nil {
			panic(err)
		}
		caches = append(caches, h)
	}
	// cache-1 is read, so cache-0 is the least recently used.
	if err := caches[1].Read(0, 1, [][]byte{make([]byte, 256)}); err != nil {
		panic(err)
	}
	m, err := p.NewHead(layout(store.Mandatory), "session")
	if err != nil {
		panic(err)
	}
	defer m.Release()
	if err := m.Append(row); err != nil {
		panic(err)
	}
	err = caches[0].Read(0, 1, [][]byte{make([]byte, 256)})
	st := p.Stats()
	fmt.Printf("cache-0 evicted: %v; evictions %d, %d bytes\n", errors.Is(err, store.ErrEvicted), st.Evictions, st.EvictedBytes)
	// Output:
	// cache-0 evicted: true; evictions 1, 256 bytes
}
