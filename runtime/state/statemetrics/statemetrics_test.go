package statemetrics_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/stateimpl"
	"github.com/gpustate/gpustate/runtime/state/statemetrics"
)

// prompt is a shared layout of blocks of 4 rows: a 32-byte vector and the
// token, the key.
var prompt = &stateimpl.Layout{
	Type:      "Prompt",
	Columns:   []stateimpl.Column{{Name: "KV", ElemSize: 4, Width: 8}, {Name: "Token", ElemSize: 4, Width: 1}},
	Growth:    stateimpl.Append,
	Bound:     64,
	BlockRows: 4,
	ShareKey:  "Token",
}

// rows returns the rows of tokens: each vector derives from its token.
func rows(toks []uint32) [][]byte {
	var kv, tok []byte
	for _, t := range toks {
		for j := range 8 {
			kv = binary.LittleEndian.AppendUint32(kv, t*8+uint32(j))
		}
		tok = binary.LittleEndian.AppendUint32(tok, t)
	}
	return [][]byte{kv, tok}
}

func keys(toks []uint32) []byte { return rows(toks)[1] }

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sharedPool makes a pool where one session appends 8 rows (two whole
// blocks) of a domain, a second adopts them and a third finds nothing to
// adopt: two lookups, one hit of 8 rows, three live heads.
func sharedPool(t *testing.T) *state.Pool {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	a, err := stateimpl.NewSharedHead(p, prompt, "a", "tenant")
	check(t, err)
	check(t, a.Append(rows(toks)))
	b, err := stateimpl.NewSharedHead(p, prompt, "b", "tenant")
	check(t, err)
	if n, err := b.AdoptPrefix(keys(toks)); err != nil || n != 8 {
		t.Fatalf("AdoptPrefix: %d rows, %v; want 8", n, err)
	}
	c, err := stateimpl.NewSharedHead(p, prompt, "c", "tenant")
	check(t, err)
	if n, err := c.AdoptPrefix(keys([]uint32{9, 9, 9, 9})); err != nil || n != 0 {
		t.Fatalf("AdoptPrefix of uncached keys: %d rows, %v; want 0", n, err)
	}
	// A failed call counts nothing: a non-empty head adopts nothing.
	if _, err := a.AdoptPrefix(keys(toks)); err == nil {
		t.Fatal("AdoptPrefix on a non-empty head succeeded")
	}
	return p
}

// TestScrape serves a pool's collector over HTTP, as the kvcache example
// does, and scrapes it with testutil: prefix lookups, hits and adopted
// rows, live handles, and each byte figure under its own name.
func TestScrape(t *testing.T) {
	p := sharedPool(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(statemetrics.NewCollector(p, "kv"))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	st := p.Stats()
	if st.LogicalBytes == st.PhysicalBytes {
		t.Fatalf("logical and physical bytes are equal (%d): sharing saved nothing, and the test could not tell them apart", st.LogicalBytes)
	}
	var want bytes.Buffer
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(&want, "# HELP gpustate_pool_%s %s\n# TYPE gpustate_pool_%s gauge\ngpustate_pool_%s{pool=\"kv\"} %d\n", name, help, name, name, v)
	}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(&want, "# HELP gpustate_pool_%s %s\n# TYPE gpustate_pool_%s counter\ngpustate_pool_%s{pool=\"kv\"} %d\n", name, help, name, name, v)
	}
	gauge("live_handles", "Live heads and snapshots.", 3)
	gauge("logical_bytes", "Bytes the live heads and snapshots would take with no sharing.", st.LogicalBytes)
	gauge("physical_bytes", "Bytes of the blocks in use; shared blocks count once.", st.PhysicalBytes)
	gauge("reserved_bytes", "Device memory the pool holds, in use or free.", st.ReservedBytes)
	counter("prefix_lookups_total", "AdoptPrefix calls that looked a prefix up.", 2)
	counter("prefix_hits_total", "AdoptPrefix calls that adopted cached rows.", 1)
	counter("prefix_adopted_rows_total", "Rows adopted from the prefix cache instead of computed.", 8)
	counter("evictions_total", "Heads, snapshots and cached prefix blocks evicted and dropped.", 0)
	names := []string{"gpustate_pool_live_handles", "gpustate_pool_logical_bytes", "gpustate_pool_physical_bytes", "gpustate_pool_reserved_bytes",
		"gpustate_pool_prefix_lookups_total", "gpustate_pool_prefix_hits_total", "gpustate_pool_prefix_adopted_rows_total", "gpustate_pool_evictions_total"}
	if err := testutil.ScrapeAndCompare(srv.URL, &want, names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 17 {
		t.Errorf("%d metrics gathered (%v), want 17", n, err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
}

// TestEvictions: under memory pressure the pool evicts optional state,
// and the collector counts the eviction and its bytes.
func TestEvictions(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{BlockBytes: 256, MaxBytes: 4 * 256})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	wide := func(ret stateimpl.Retention) *stateimpl.Layout {
		return &stateimpl.Layout{Type: "Cache", Columns: []stateimpl.Column{{Name: "Row", ElemSize: 8, Width: 32}}, Retention: ret}
	}
	row := [][]byte{bytes.Repeat([]byte{7}, 256)}
	for i := range 4 {
		h, err := stateimpl.NewHead(p, wide(stateimpl.Optional), state.Owner(fmt.Sprint("o", i)))
		check(t, err)
		check(t, h.Append(row))
	}
	m, err := stateimpl.NewHead(p, wide(stateimpl.Mandatory), "m")
	check(t, err)
	check(t, m.Append(row)) // takes the least recently used optional head's block
	c := statemetrics.NewCollector(p, "small")
	want := `# HELP gpustate_pool_evictions_total Heads, snapshots and cached prefix blocks evicted and dropped.
# TYPE gpustate_pool_evictions_total counter
gpustate_pool_evictions_total{pool="small"} 1
# HELP gpustate_pool_evicted_bytes_total Bytes of the blocks eviction dropped, from device memory or the host tier.
# TYPE gpustate_pool_evicted_bytes_total counter
gpustate_pool_evicted_bytes_total{pool="small"} 256
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "gpustate_pool_evictions_total", "gpustate_pool_evicted_bytes_total"); err != nil {
		t.Error(err)
	}
}

// TestTier: with a host tier, the pool moves its victim there instead of
// dropping it, and brings it back on use; the collector exports the tier's
// bytes and its totals, and counts no eviction.
func TestTier(t *testing.T) {
	p, err := state.NewPool(device.Host(), state.PoolOptions{BlockBytes: 256, MaxBytes: 4 * 256, HostTier: 1 << 20})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	wide := func(ret stateimpl.Retention) *stateimpl.Layout {
		return &stateimpl.Layout{Type: "Cache", Columns: []stateimpl.Column{{Name: "Row", ElemSize: 8, Width: 32}}, Retention: ret}
	}
	row := [][]byte{bytes.Repeat([]byte{7}, 256)}
	var hs []*stateimpl.Head
	for i := range 4 {
		h, err := stateimpl.NewHead(p, wide(stateimpl.Optional), state.Owner(fmt.Sprint("o", i)))
		check(t, err)
		check(t, h.Append(row))
		hs = append(hs, h)
	}
	m, err := stateimpl.NewHead(p, wide(stateimpl.Mandatory), "m")
	check(t, err)
	check(t, m.Append(row))                                 // the least recently used optional head moves to the tier
	check(t, hs[0].Read(0, 1, [][]byte{make([]byte, 256)})) // back; the next one goes
	c := statemetrics.NewCollector(p, "tier")
	want := `# HELP gpustate_pool_evictions_total Heads, snapshots and cached prefix blocks evicted and dropped.
# TYPE gpustate_pool_evictions_total counter
gpustate_pool_evictions_total{pool="tier"} 0
# HELP gpustate_pool_tier_bytes Bytes of state blocks the host tier holds.
# TYPE gpustate_pool_tier_bytes gauge
gpustate_pool_tier_bytes{pool="tier"} 256
# HELP gpustate_pool_tier_dropped_bytes_total Bytes the host tier dropped to make room.
# TYPE gpustate_pool_tier_dropped_bytes_total counter
gpustate_pool_tier_dropped_bytes_total{pool="tier"} 0
# HELP gpustate_pool_tier_in_bytes_total Bytes brought back from the host tier to device memory.
# TYPE gpustate_pool_tier_in_bytes_total counter
gpustate_pool_tier_in_bytes_total{pool="tier"} 256
# HELP gpustate_pool_tier_out_bytes_total Bytes moved from device memory to the host tier.
# TYPE gpustate_pool_tier_out_bytes_total counter
gpustate_pool_tier_out_bytes_total{pool="tier"} 512
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "gpustate_pool_evictions_total", "gpustate_pool_tier_bytes",
		"gpustate_pool_tier_dropped_bytes_total", "gpustate_pool_tier_in_bytes_total", "gpustate_pool_tier_out_bytes_total"); err != nil {
		t.Error(err)
	}
}

// TestCoreKeepsItsDependencies: runtime/state and the generated code's
// other imports never link the Prometheus client; only this package does.
func TestCoreKeepsItsDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/gpustate/gpustate/runtime/state", "github.com/gpustate/gpustate/runtime/device").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/prometheus/") {
			t.Errorf("runtime/state or runtime/device depends on %s", dep)
		}
	}
}
