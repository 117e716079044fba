package main

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// asyncChunk is the prompt tokens one AppendAsync call uploads.
const asyncChunk = 16

// async uploads a third session's prompt the way a serving loop does when
// it must not stall the device: AppendAsync queues each chunk's copies on a
// stream and returns (the chunk is staged, so the loop reuses its batch at
// once), ReadAsync queues the copy of the whole prompt back into
// page-locked memory on the same stream, in stream order after the
// appends, and the host waits once, at the end. ReadFields then reads the
// tokens alone, without copying keys or values.
func async(w io.Writer, b device.Backend, p *state.Pool, prompt []int32) (err error) {
	sb, ok := b.(device.Streams)
	if !ok {
		fmt.Fprintf(w, "async: the %s backend has no streams; skipped\n", b.Name())
		return nil
	}
	st, err := sb.NewStream()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	s, err := cache.NewKVCacheState(p, "session-3")
	if err != nil {
		return err
	}
	defer s.Release()
	calls := 0
	for at := 0; at < len(prompt); at += asyncChunk {
		if err := s.AppendAsync(st, rows(prompt[at:min(at+asyncChunk, len(prompt))], at)); err != nil {
			return err
		}
		calls++
	}
	// The batch's fields live in page-locked memory, so the copies back
	// are truly asynchronous; ReadAsync reslices them, reusing it.
	n := len(prompt)
	pinned, err := sb.HostAlloc(n * (2*width*4 + 4))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Sync(), sb.HostFree(pinned)) }()
	back := cache.KVCache{
		Keys:   state.Rows[float32](pinned[:n*width*4])[:0],
		Values: state.Rows[float32](pinned[n*width*4 : 2*n*width*4])[:0],
		Token:  state.Rows[int32](pinned[2*n*width*4:])[:0],
	}
	if err := s.ReadAsync(st, &back, 0, n); err != nil {
		return err
	}
	if err := st.Sync(); err != nil { // the one wait: the appends, then the read
		return err
	}
	want := rows(prompt, 0)
	same := slices.Equal(back.Keys, want.Keys) && slices.Equal(back.Values, want.Values) && slices.Equal(back.Token, want.Token)
	fmt.Fprintf(w, "async: %d prompt rows appended on a stream by %d AppendAsync calls and read back by ReadAsync in stream order, the host waiting once: rows identical %v\n",
		n, calls, same)
	if !same {
		return errors.New("async: ReadAsync read other rows than AppendAsync appended")
	}
	tokens := cache.KVCache{Token: make([]int32, 0, n)}
	if err := s.ReadFields(&tokens, 0, n); err != nil {
		return err
	}
	fmt.Fprintf(w, "  ReadFields: the %d tokens alone (%d bytes copied, not %d), equal to the prompt %v\n",
		len(tokens.Token), 4*n, n*(2*width*4+4), slices.Equal(tokens.Token, prompt))
	return s.Release()
}
