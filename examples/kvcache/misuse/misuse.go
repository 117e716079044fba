//go:build statevet_demo

// Package misuse holds mistakes people make with state handles, on purpose,
// for statevet to catch: it compiles, and each mistake is one finding, one
// for each analyzer but stcontract (examples/contracts/faulty has those):
// growth with no bound (stgrowth), a snapshot leaked on an early return
// (stcleanup), a kernel writing through a snapshot's spans (stalias), an
// append error dropped in a loop (stgrowth) and a use after Release
// (streleased).
//
//	GOFLAGS=-tags=statevet_demo statevet ./examples/kvcache/misuse
//
// It builds only with -tags statevet_demo, so that the repository's own
// checks stay clean. expected.txt lists the findings; make demo checks that
// statevet reports exactly those. The package has no go:generate line:
// stategen refuses Transcript's contract for the same reason statevet
// reports it.
package misuse

import (
	"errors"
	"math"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
)

// Transcript is every token a session ever produced. Its growth line has no
// bound: nothing stops it from filling the device, and nobody decided that
// this is fine (that would be bound=unbounded reason="...").
//
//state:contract purpose="every token of a session"
//state:growth append
//state:owner session
type Transcript struct {
	Tokens []int32
}

// lastToken returns the token of the cache's last row, read from a snapshot
// so that a concurrent writer cannot change it halfway. The early return for
// an empty cache skips the Release: the snapshot, and the blocks it holds,
// leak.
func lastToken(s *cache.KVCacheState) (int32, error) {
	v, err := s.Snapshot()
	if err != nil {
		return 0, err
	}
	if v.Len() == 0 {
		return 0, errors.New("empty cache")
	}
	r, err := v.Read(v.Len()-1, v.Len())
	v.Release()
	if err != nil {
		return 0, err
	}
	return r.Token[0], nil
}

// scaleKeys stands in for a kernel that scales float32 rows in place, each
// rowBytes long, at dst.
//
//state:writes dst
func scaleKeys(b device.Backend, dst []device.Span, rowBytes int, factor float32) error {
	for _, sp := range dst {
		buf := make([]byte, sp.Rows*rowBytes)
		if err := b.CopyDtoH(buf, sp.Ptr); err != nil {
			return err
		}
		for i := 0; i+4 <= len(buf); i += 4 {
			bits := uint32(buf[i]) | uint32(buf[i+1])<<8 | uint32(buf[i+2])<<16 | uint32(buf[i+3])<<24
			bits = math.Float32bits(math.Float32frombits(bits) * factor)
			buf[i], buf[i+1], buf[i+2], buf[i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		}
		if err := b.CopyHtoD(sp.Ptr, buf); err != nil {
			return err
		}
	}
	return nil
}

// temperScores rescales the keys of a snapshot on the device. A snapshot's
// spans are read only: the blocks are shared with the live cache and every
// branch, so the kernel silently changes all of them, and the snapshot no
// longer holds the version it promised. (The right way: Branch, then
// rewrite the rows through the branch.)
func temperScores(b device.Backend, v *cache.KVCacheSnapshot) error {
	spans, err := v.Spans(0, v.Len())
	if err != nil {
		return err
	}
	return scaleKeys(b, spans.Keys, 4*cache.Layers*cache.Dim, 0.5)
}

// replay appends recorded batches to a cache. The error of Append is
// dropped: once the cache reaches its bound every later Append fails with
// state.ErrBound, and the replay goes on as if the rows were there.
func replay(s *cache.KVCacheState, batches []cache.KVCache) {
	for _, b := range batches {
		s.Append(b)
	}
}

// finish ends a session and says how many tokens it held. Len is called
// after Release: the handle no longer holds the rows it is asked about.
func finish(s *cache.KVCacheState) int {
	s.Release()
	return s.Len()
}
