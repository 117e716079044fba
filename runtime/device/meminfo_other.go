//go:build !linux

package device

import "errors"

// physicalMemory is not implemented off Linux; a host backend with
// HostOptions.MaxBytes set reports its cap instead.
func physicalMemory() (free, total uint64, err error) {
	return 0, 0, errors.New("physical memory size unknown on this system")
}
