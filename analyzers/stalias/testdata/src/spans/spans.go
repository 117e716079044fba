package spans

import (
	"dev"

	"github.com/gpustate/gpustate/runtime/device"
)

// ---- spans of a view are read only ----

func headSpans(s *dev.KVState) {
	sp, err := s.Spans(0, s.Len())
	if err != nil {
		return
	}
	dev.Scale(sp.Keys, 2) // want `write through the spans Spans of KVState returned, which are read only: the blocks may be shared with snapshots, branches and other owners' heads that adopted them as a prefix; write rows through the spans AppendDevice or WriteDevice returns`
	keys := sp.Values[1:]
	dev.Scale(keys, 2) // want `write through the spans Spans of KVState returned`
}

func snapSpans(v *dev.KVSnapshot) {
	sp, err := v.Spans(0, v.Len())
	if err != nil {
		return
	}
	dev.Scale(sp.Values, 2) // want `write through a view of snapshot KVSnapshot, which is immutable: its device spans are read only, the blocks are shared with the state; write rows through the state's AppendDevice or WriteDevice \(on a branch to keep the snapshot's version\)`
	for _, k := range sp.Keys {
		dev.Scale([]device.Span{k}, 2) // want `write through a view of snapshot KVSnapshot`
	}
}

// launch writes dst with no directive: the write is inferred from the
// backend call.
func launch(b device.Backend, dst []device.Span) error {
	for _, x := range dst {
		if err := b.Memset(x.Ptr, 0, x.Rows); err != nil {
			return err
		}
	}
	return nil
}

func backend(b device.Backend, v *dev.KVSnapshot, data []byte) {
	sp, err := v.Spans(0, v.Len())
	if err != nil {
		return
	}
	p := sp.Keys[0].Ptr
	b.CopyHtoD(p, data)                          // want `write through a view of snapshot KVSnapshot`
	b.Memset(sp.Keys[0].Ptr+8, 0, 4)             // want `write through a view of snapshot KVSnapshot`
	b.CopyDtoD(device.Ptr(p), 0, 4)              // want `write through a view of snapshot KVSnapshot`
	launch(b, sp.Values)                         // want `write through a view of snapshot KVSnapshot`
	b.CopyDtoH(data, p)                          // reading is fine
	b.CopyDtoD(device.Ptr(0x1000), p, len(data)) // p is the source
}

// ---- device spans are the caller's until the next call on the head ----

func afterSnapshot(s *dev.KVState) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	v, err := s.Snapshot()
	if err != nil {
		return
	}
	defer v.Release()
	dev.Scale(sp.Keys, 1) // want `write through the spans AppendDevice of KVState returned after a later call on the state \(Snapshot\); they are the caller's only until the next call on it: finish the writes before that call, or take new spans`
}

func afterBranch(s *dev.KVState) {
	sp, err := s.WriteDevice(0, 4)
	if err != nil {
		return
	}
	b, err := s.Branch()
	if err != nil {
		return
	}
	defer b.Release()
	keys := sp.Keys
	dev.Scale(keys, 1) // want `write through the spans WriteDevice of KVState returned after a later call on the state \(Branch\)`
}

func afterWrite(s *dev.KVState, rows dev.KV, b device.Backend) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	if err := s.Append(rows); err != nil {
		return
	}
	launch(b, sp.Values)            // want `after a later call on the state \(Append\)`
	b.Memset(sp.Keys[0].Ptr, 0, 16) // want `after a later call on the state \(Append\)`
}

func onSomePath(s *dev.KVState, snap bool) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	if snap {
		v, err := s.Snapshot()
		if err == nil {
			v.Release()
		}
	}
	dev.Scale(sp.Keys, 1) // want `after a later call on the state \(Snapshot\)`
}

func deferred(s *dev.KVState) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	defer dev.Scale(sp.Keys, 1) // want `after a later call on the state \(Snapshot\)`
	v, err := s.Snapshot()
	if err != nil {
		return
	}
	v.Release()
}

// ---- closures write where they run ----

func closures(v *dev.KVSnapshot, s *dev.KVState) {
	sp, err := v.Spans(0, v.Len())
	if err != nil {
		return
	}
	f := func() {
		dev.Scale(sp.Keys, 2) // want `write through a view of snapshot KVSnapshot`
	}
	f()
	defer func() {
		vals := sp.Values
		dev.Scale(vals, 2) // want `write through a view of snapshot KVSnapshot`
	}()
	go func() {
		dev.Scale(sp.Values[:1], 2) // want `write through a view of snapshot KVSnapshot`
	}()
	fresh, err := s.AppendDevice(2)
	if err != nil {
		return
	}
	g := func() {
		dev.Scale(fresh.Keys, 1) // want `after a later call on the state \(Snapshot\)`
	}
	w, err := s.Snapshot()
	if err != nil {
		return
	}
	defer w.Release()
	g()
}

func deferredLiteral(s *dev.KVState) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	defer func() {
		dev.Scale(sp.Values, 1) // want `after a later call on the state \(Branch\)`
	}()
	b, err := s.Branch()
	if err != nil {
		return
	}
	b.Release()
}

func releasedHead(s *dev.KVState) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	s.Release()
	dev.Scale(sp.Keys, 1) // want `after a later call on the state \(Release\)`
}

func closureCallsHead(s *dev.KVState) {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return
	}
	func() {
		v, err := s.Snapshot()
		if err != nil {
			return
		}
		defer v.Release()
		dev.Scale(sp.Keys, 1) // want `after a later call on the state \(Snapshot\)`
	}()
}

// ---- no findings ----

func deferredRelease(s *dev.KVState) error {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return err
	}
	defer s.Release() // runs after the write
	return dev.Scale(sp.Keys, 1)
}

func deferredFresh(s *dev.KVState) error {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return err
	}
	defer func() { dev.Scale(sp.Keys, 1) }() // nothing is called on s after
	return nil
}

func prefill(s *dev.KVState, b device.Backend, data []byte) error {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return err
	}
	_ = s.Len() // a plain read does not end the spans
	if err := dev.Scale(sp.Keys, 1); err != nil {
		return err
	}
	if err := b.CopyHtoD(sp.Values[0].Ptr, data); err != nil {
		return err
	}
	if err := launch(b, sp.Values); err != nil {
		return err
	}
	v, err := s.Snapshot()
	if err != nil {
		return err
	}
	defer v.Release()
	sp, err = s.AppendDevice(4) // new spans, after the snapshot
	if err != nil {
		return err
	}
	return dev.Scale(sp.Keys, 1)
}

func rewrite(s *dev.KVState) error {
	sp, err := s.WriteDevice(0, 4)
	if err != nil {
		return err
	}
	run := func() error { return dev.Scale(sp.Keys, 1) }
	if err := run(); err != nil {
		return err
	}
	b, err := s.Branch()
	if err != nil {
		return err
	}
	return b.Release()
}

func otherHead(s, t *dev.KVState) error {
	sp, err := s.AppendDevice(4)
	if err != nil {
		return err
	}
	v, err := t.Snapshot()
	if err != nil {
		return err
	}
	defer v.Release()
	return dev.Scale(sp.Keys, 1)
}

func reads(s *dev.KVState, v *dev.KVSnapshot, b device.Backend, out []float32) {
	hsp, err := s.Spans(0, 4)
	if err != nil {
		return
	}
	vsp, err := v.Spans(0, 4)
	if err != nil {
		return
	}
	dev.Gather(out, hsp.Keys)
	dev.Gather(out, vsp.Keys)
	buf := make([]byte, 16)
	b.CopyDtoH(buf, vsp.Keys[0].Ptr)
	k := hsp.Keys[0]
	k.Rows = 0 // a copy of the span
	f := func() { dev.Gather(out, vsp.Values) }
	f()
}

// ---- a span's fields are a host-side descriptor ----

// trim shortens the spans it is given: it writes their descriptors, not
// the device memory they locate, so it is no writer of dst.
func trim(dst []device.Span, n int) {
	for i := range dst {
		dst[i].Rows = min(dst[i].Rows, n)
	}
}

func descriptorFields(s *dev.KVState, v *dev.KVSnapshot) {
	sp, err := s.Spans(0, s.Len())
	if err != nil {
		return
	}
	sp.Keys[0].Rows = 1
	k := &sp.Keys[0]
	k.Rows = 2
	k.Ptr += 4
	trim(sp.Values, 1)
	vs, err := v.Spans(0, v.Len())
	if err != nil {
		return
	}
	vs.Keys[0].Rows--
	trim(vs.Values, 1)
}
