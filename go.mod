module github.com/gpustate/gpustate

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/dave/jennifer v1.7.1
	github.com/ebitengine/purego v0.11.3
	github.com/golangci/plugin-module-register v0.1.2
	github.com/prometheus/client_golang v1.25.0
	golang.org/x/tools v0.52.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
