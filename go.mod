module github.com/gpustate/gpustate

go 1.26.0

require (
	github.com/NVIDIA/go-nvml v0.13.4-1 // indirect
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	golang.org/x/tools v0.52.0 // indirect
)
