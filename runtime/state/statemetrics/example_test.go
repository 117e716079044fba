package statemetrics_test

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
	"github.com/gpustate/gpustate/runtime/state/stateimpl"
	"github.com/gpustate/gpustate/runtime/state/statemetrics"
)

// A pool's figures as Prometheus metrics: register its collector, then
// serve the registry (promhttp.HandlerFor) at /metrics.
func ExampleNewCollector() {
	p, err := state.NewPool(device.Host(), state.PoolOptions{})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(statemetrics.NewCollector(p, "kv"))

	h, err := stateimpl.NewHead(p, &stateimpl.Layout{Type: "Row", Columns: []stateimpl.Column{{Name: "V", ElemSize: 4, Width: 4}}}, "session-1")
	if err != nil {
		panic(err)
	}
	defer h.Release()
	want := `# HELP gpustate_pool_live_handles Live heads and snapshots.
# TYPE gpustate_pool_live_handles gauge
gpustate_pool_live_handles{pool="kv"} 1
`
	fmt.Println(testutil.GatherAndCompare(reg, strings.NewReader(want), "gpustate_pool_live_handles"))
	// Output:
	// <nil>
}
