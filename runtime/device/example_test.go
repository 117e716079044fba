package device_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/gpustate/gpustate/runtime/device"
)

func ExampleHost() {
	b := device.Host()
	defer b.Close()
	p, err := b.Alloc(16)
	if err != nil {
		log.Fatal(err)
	}
	if err := b.CopyHtoD(p+4, []byte("rows")); err != nil {
		log.Fatal(err)
	}
	out := make([]byte, 8)
	if err := b.CopyDtoH(out, p); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", out)
	// A range past the allocation's end is an error, not a fault.
	err = b.CopyDtoH(make([]byte, 8), p+12)
	fmt.Println(errors.Is(err, device.ErrInvalidPtr))
	// Output:
	// "\x00\x00\x00\x00rows"
	// true
}

func ExampleOpen() {
	// GPUSTATE_BACKEND=host|cuda forces a backend; unset, Open takes the
	// GPU where there is one and the host otherwise.
	b, err := device.Open()
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	free, total, err := b.MemInfo()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s backend: %d of %d bytes free\n", b.Name(), free, total)
}
