package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// isoSecret reports where cols hold a whole KV row (32 bytes) of b: a
// row another owner's kernel wrote.
func isoSecret(cols [][]byte, b byte) int {
	return bytes.Index(cols[0], bytes.Repeat([]byte{b}, 32))
}

// Owners of one domain share a prompt's whole blocks. Owner a
// computes the prompt and then a private tail (a kernel's rows, 0xA1)
// in a partly filled block; b adopts the prefix and appends on the
// device; a releases, b's blocks of a's outlive it; owner c then takes
// whatever is free. No owner's read or device-append spans ever hold
// another owner's private rows, under a cap that forces reuse, and the
// adopters read the prompt's rows.
func TestIsolationSharedPrefixPrivateTails(t *testing.T) {
	for _, cap := range []int64{0, 40 * 256} {
		t.Run(fmt.Sprint("cap ", cap), func(t *testing.T) {
			l := prompt(16, 1024)
			p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: cap, HostTier: 0})
			toks := tokens(3, 32)
			a, _ := session(t, p, l, "a", "d", toks)
			kernel := func(h *Head, n int, v byte) [][]device.Span {
				spans := must[[][]device.Span](t)(h.AppendDevice(n))
				for c, ss := range spans {
					rb := []int{32, 4}[c]
					for _, sp := range ss {
						check(t, p.b.Memset(sp.Ptr, v, sp.Rows*rb))
					}
				}
				return spans
			}
			kernel(a, 7, 0xA1)
			b := must[*Head](t)(p.NewSharedHead(l, "b", "d"))
			n := must[int](t)(b.AdoptPrefix(keyBytes(toks)))
			if n != 32 {
				t.Fatalf("b adopted %d rows, want 32", n)
			}
			spans := must[[][]device.Span](t)(b.AppendDevice(9))
			got, err := isoSpanBytes(p.b, l, spans)
			check(t, err)
			if i := isoSecret(got, 0xA1); i >= 0 {
				t.Fatalf("b's device append finds a's private rows at byte %d", i)
			}
			for c, ss := range spans {
				rb := []int{32, 4}[c]
				for _, sp := range ss {
					check(t, p.b.Memset(sp.Ptr, 0xB1, sp.Rows*rb))
				}
			}
			if i := isoSecret(readPrompt(t, b), 0xA1); i >= 0 {
				t.Fatalf("b reads a's private rows at byte %d", i)
			}
			check(t, a.Release())
			// c takes what is free, many times over.
			for round := range 6 {
				c := must[*Head](t)(p.NewSharedHead(l, Owner(fmt.Sprint("c", round)), "d"))
				got, err := isoSpanBytes(p.b, l, must[[][]device.Span](t)(c.AppendDevice(30)))
				check(t, err)
				if i := isoSecret(got, 0xA1); i >= 0 {
					t.Fatalf("round %d: c's device append finds a's private rows at byte %d", round, i)
				}
				if i := isoSecret(got, 0xB1); i >= 0 {
					t.Fatalf("round %d: c's device append finds b's private rows at byte %d", round, i)
				}
				check(t, c.Release())
				if round == 2 {
					check(t, b.Release())
				}
			}
			checkInv(t, p)
		})
	}
}
