module github.com/gpustate/gpustate

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/dave/jennifer v1.7.1
	github.com/ebitengine/purego v0.11.3
	golang.org/x/tools v0.52.0
)

require (
	github.com/golangci/plugin-module-register v0.1.2 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
