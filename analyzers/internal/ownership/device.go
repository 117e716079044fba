package ownership

import "go/types"

// DevicePath is the import path of the device layer, whose Span and Ptr
// locate device memory.
const DevicePath = "github.com/gpustate/gpustate/runtime/device"

// InDevice reports whether fn is declared in the device layer (a Backend
// method, or a method of a backend there).
func InDevice(fn *types.Func) bool {
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == DevicePath
}

// DeviceDst reports whether parameter i of fn is device memory that fn
// writes: a device.Ptr parameter named dst of a function or method of the
// device layer (CopyHtoD, CopyDtoD, Memset and their asynchronous forms).
func DeviceDst(fn *types.Func, i int) bool {
	if !InDevice(fn) || i < 0 {
		return false
	}
	v := ParamVar(fn.Signature(), i)
	return v != nil && v.Name() == "dst" && isDeviceNamed(v.Type(), "Ptr")
}

// isDeviceNamed reports whether t is the named type name of the device
// layer.
func isDeviceNamed(t types.Type, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Name() == name && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == DevicePath
}

// HoldsDeviceSpan reports whether a value of type t holds a device.Span: t
// is one, or a pointer, slice, array or struct over one (the generated
// TSpans types).
func HoldsDeviceSpan(t types.Type) bool {
	return holdsDeviceSpan(t, 0)
}

func holdsDeviceSpan(t types.Type, depth int) bool {
	if t == nil || depth > 4 {
		return false
	}
	if isDeviceNamed(t, "Span") {
		return true
	}
	switch u := t.Underlying().(type) {
	case *types.Pointer:
		return holdsDeviceSpan(u.Elem(), depth+1)
	case *types.Slice:
		return holdsDeviceSpan(u.Elem(), depth+1)
	case *types.Array:
		return holdsDeviceSpan(u.Elem(), depth+1)
	case *types.Struct:
		for f := range u.Fields() {
			if holdsDeviceSpan(f.Type(), depth+1) {
				return true
			}
		}
	}
	return false
}

// SpanField reports whether sel selects a field of a device.Span (its Ptr
// or Rows, directly or through a pointer): the span is a host-side
// descriptor, so writing its fields (sp.Rows = n) writes no device memory.
func SpanField(sel *types.Selection) bool {
	if sel == nil || sel.Kind() != types.FieldVal {
		return false
	}
	t := sel.Recv()
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	return isDeviceNamed(t, "Span") && len(sel.Index()) == 1
}
