package c

// A plain package: "state" appears in prose only (state: not a directive).
func Plain() int { return 1 }
