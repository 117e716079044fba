package device

import "syscall"

// physicalMemory reports the machine's free and total physical memory.
func physicalMemory() (free, total uint64, err error) {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0, 0, err
	}
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1
	}
	return uint64(si.Freeram) * unit, uint64(si.Totalram) * unit, nil
}
