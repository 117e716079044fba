package device

import "fmt"

// cuResult is the driver's CUresult.
type cuResult int32

// Driver results the backend treats specially.
const (
	cuSuccess        cuResult = 0
	cuErrOutOfMemory cuResult = 2
	cuErrStubLibrary cuResult = 34
	cuErrNoDevice    cuResult = 100
)

// errorNames names the results a caller is most likely to meet; others are
// named by cuGetErrorName where the driver has it.
var errorNames = map[cuResult]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	35:  "CUDA_ERROR_INSUFFICIENT_DRIVER",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	999: "CUDA_ERROR_UNKNOWN",
}

// CUDAError is a failure the CUDA driver reported. errors.Is matches it
// against ErrOutOfMemory for CUDA_ERROR_OUT_OF_MEMORY and against
// ErrNoDevice for CUDA_ERROR_NO_DEVICE and CUDA_ERROR_STUB_LIBRARY.
type CUDAError struct {
	Func    string // the driver entry point, as exported ("cuMemAlloc_v2")
	Code    int    // the CUresult
	Name    string // its name ("CUDA_ERROR_OUT_OF_MEMORY")
	Library string // the driver library that answered
}

func (e *CUDAError) Error() string {
	return fmt.Sprintf("device: cuda: %s: %s (%d)", e.Func, e.Name, e.Code)
}

// Is reports whether the error stands for target.
func (e *CUDAError) Is(target error) bool {
	switch target {
	case ErrOutOfMemory:
		return cuResult(e.Code) == cuErrOutOfMemory
	case ErrNoDevice:
		return cuResult(e.Code) == cuErrNoDevice || cuResult(e.Code) == cuErrStubLibrary
	}
	return false
}
