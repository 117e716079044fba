//go:build linux

package device

import "testing"

// TestCUDAFakeBatchCopies runs the batch checks on the CUDA backend over
// the test driver.
func TestCUDAFakeBatchCopies(t *testing.T) {
	c := openFake(t, fakeDriver(t))
	defer c.Close()
	testBatchCopies(t, c)
}

// TestCUDAFakeDeviceBatchCopies runs the checks of copies within device
// memory in one call on the CUDA backend over the test driver.
func TestCUDAFakeDeviceBatchCopies(t *testing.T) {
	c := openFake(t, fakeDriver(t))
	defer c.Close()
	testDeviceBatchCopies(t, c)
}

// TestCUDAFakeBatchRecord runs the batch-and-event checks on the CUDA
// backend over the test driver.
func TestCUDAFakeBatchRecord(t *testing.T) {
	c := openFake(t, fakeDriver(t))
	defer c.Close()
	testBatchRecord(t, c)
}

// TestCUDAFakeBatchReads runs the batched reads' checks on the CUDA
// backend over the test driver.
func TestCUDAFakeBatchReads(t *testing.T) {
	c := openFake(t, fakeDriver(t))
	defer c.Close()
	testBatchReads(t, c)
}

// TestCUDAFakeBatchCopiesToHost runs the checks of a batch of copies to
// the host on the CUDA backend over the test driver.
func TestCUDAFakeBatchCopiesToHost(t *testing.T) {
	c := openFake(t, fakeDriver(t))
	defer c.Close()
	testBatchCopiesToHost(t, c)
}
