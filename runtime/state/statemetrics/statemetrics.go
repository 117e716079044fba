// Package statemetrics exports a runtime/state pool's figures as
// Prometheus metrics, as inference servers export their KV cache's
// (vLLM's cache usage and prefix cache hit rate). It is a package of its
// own so that runtime/state keeps its few dependencies: only a program that
// imports statemetrics links the Prometheus client.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(statemetrics.NewCollector(pool, "kv"))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Every scrape reads Pool.Stats once; nothing runs between scrapes. The
// metrics, each labelled pool="NAME" so that a program may register
// several pools:
//
//	gpustate_pool_logical_bytes            gauge    PoolStats.LogicalBytes
//	gpustate_pool_physical_bytes           gauge    PoolStats.PhysicalBytes
//	gpustate_pool_reserved_bytes           gauge    PoolStats.ReservedBytes
//	gpustate_pool_pending_bytes            gauge    PoolStats.PendingBytes
//	gpustate_pool_cached_bytes             gauge    PoolStats.CachedBytes
//	gpustate_pool_history_bytes            gauge    PoolStats.HistoryBytes
//	gpustate_pool_live_handles             gauge    PoolStats.Live
//	gpustate_pool_evicted_bytes_total      counter  PoolStats.EvictedBytes
//	gpustate_pool_rebuilt_bytes_total      counter  PoolStats.RebuiltBytes
//	gpustate_pool_evictions_total          counter  PoolStats.Evictions
//	gpustate_pool_prefix_lookups_total     counter  PoolStats.AdoptCalls
//	gpustate_pool_prefix_hits_total        counter  PoolStats.AdoptHits
//	gpustate_pool_prefix_adopted_rows_total counter PoolStats.AdoptedRows
//	gpustate_pool_tier_bytes               gauge    PoolStats.TierBytes
//	gpustate_pool_tier_out_bytes_total     counter  PoolStats.TierOut
//	gpustate_pool_tier_in_bytes_total      counter  PoolStats.TierIn
//	gpustate_pool_tier_dropped_bytes_total counter  PoolStats.TierDropped
//
// The prefix hit rate is rate(gpustate_pool_prefix_hits_total) /
// rate(gpustate_pool_prefix_lookups_total); the share of the pool's
// memory in use, gpustate_pool_physical_bytes / gpustate_pool_reserved_bytes.
package statemetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpustate/gpustate/runtime/state"
)

// metric is one exported figure of PoolStats.
type metric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(*state.PoolStats) float64
}

var metrics = []metric{
	{"logical_bytes", "Bytes the live heads and snapshots would take with no sharing.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.LogicalBytes) }},
	{"physical_bytes", "Bytes of the blocks in use; shared blocks count once.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.PhysicalBytes) }},
	{"reserved_bytes", "Device memory the pool holds, in use or free.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.ReservedBytes) }},
	{"pending_bytes", "Bytes of released blocks that queued device work may still use.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.PendingBytes) }},
	{"cached_bytes", "Bytes of shared prefix blocks no head holds, kept for adoption.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.CachedBytes) }},
	{"history_bytes", "Bytes of the deltas checkpointed heads keep.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.HistoryBytes) }},
	{"live_handles", "Live heads and snapshots.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.Live) }},
	{"evicted_bytes_total", "Bytes of the blocks eviction dropped, from device memory or the host tier.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.EvictedBytes) }},
	{"rebuilt_bytes_total", "Bytes of the blocks rebuilding reconstructable state took.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.RebuiltBytes) }},
	{"evictions_total", "Heads, snapshots and cached prefix blocks evicted and dropped.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.Evictions) }},
	{"prefix_lookups_total", "AdoptPrefix calls that looked a prefix up.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.AdoptCalls) }},
	{"prefix_hits_total", "AdoptPrefix calls that adopted cached rows.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.AdoptHits) }},
	{"prefix_adopted_rows_total", "Rows adopted from the prefix cache instead of computed.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.AdoptedRows) }},
	{"tier_bytes", "Bytes of state blocks the host tier holds.", prometheus.GaugeValue,
		func(s *state.PoolStats) float64 { return float64(s.TierBytes) }},
	{"tier_out_bytes_total", "Bytes moved from device memory to the host tier.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.TierOut) }},
	{"tier_in_bytes_total", "Bytes brought back from the host tier to device memory.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.TierIn) }},
	{"tier_dropped_bytes_total", "Bytes the host tier dropped to make room.", prometheus.CounterValue,
		func(s *state.PoolStats) float64 { return float64(s.TierDropped) }},
}

// Collector is a prometheus.Collector of one pool's figures.
type Collector struct {
	pool  *state.Pool
	descs []*prometheus.Desc
}

// NewCollector returns a collector of p's figures, labelled pool=name.
func NewCollector(p *state.Pool, name string) *Collector {
	c := &Collector{pool: p}
	for _, m := range metrics {
		c.descs = append(c.descs, prometheus.NewDesc("gpustate_pool_"+m.name, m.help, nil, prometheus.Labels{"pool": name}))
	}
	return c
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads the pool's stats once and sends every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stats()
	for i, m := range metrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&st))
	}
}
