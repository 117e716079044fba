package main

import (
	"strings"
	"testing"
)

// TestMetricsLoopbackOnly: -metrics serves on loopback addresses only.
func TestMetricsLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:9464", "example.com:80", "nonsense"} {
		if _, err := serveMetrics(addr); err == nil {
			t.Errorf("serveMetrics(%q) served", addr)
		} else if !strings.Contains(err.Error(), addr) {
			t.Errorf("serveMetrics(%q): %v, which does not name the address", addr, err)
		}
	}
}
