package contract

import "testing"

func TestGeneratedNames(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want Names
	}{
		{"KVCache", Names{Head: "KVCacheState", Snapshot: "KVCacheSnapshot", Spans: "KVCacheSpans", Ctor: "NewKVCacheState", SharedCtor: "NewKVCacheStateShared", File: "kvcache_state.go"}},
		{"decoder", Names{Head: "decoderState", Snapshot: "decoderSnapshot", Spans: "decoderSpans", Ctor: "newDecoderState", SharedCtor: "newDecoderStateShared", File: "decoder_state.go"}},
	} {
		if got := GeneratedNames(tc.typ); got != tc.want {
			t.Errorf("GeneratedNames(%q) = %+v, want %+v", tc.typ, got, tc.want)
		}
	}
	if got := GeneratedNames("KVCache").VariantFile("cuda_and_linux"); got != "kvcache_state_cuda_and_linux.go" {
		t.Errorf("VariantFile = %q, want kvcache_state_cuda_and_linux.go", got)
	}
}

func TestGeneratedFor(t *testing.T) {
	declared := map[string]bool{"KVCache": true, "decoder": true, "A": true, "ASnapshot": true}
	for _, tc := range []struct {
		name, want string
		head       bool
	}{
		{"KVCacheState", "KVCache", true},
		{"KVCacheSnapshot", "KVCache", false},
		{"decoderState", "decoder", true},
		{"ASnapshotState", "ASnapshot", true}, // not A's: A's snapshot is ASnapshot
		{"ASnapshot", "A", false},
		{"KVCacheSpans", "", false}, // spans name no head to trace
		{"OtherState", "", false},   // Other is not declared
		{"State", "", false},
		{"", "", false},
	} {
		typ, n, ok := GeneratedFor(tc.name, func(typ string) bool { return declared[typ] })
		if typ != tc.want || ok != (tc.want != "") {
			t.Errorf("GeneratedFor(%q) = %q, %v; want %q", tc.name, typ, ok, tc.want)
			continue
		}
		if ok && (n != GeneratedNames(typ) || (n.Head == tc.name) != tc.head) {
			t.Errorf("GeneratedFor(%q) names %+v, want GeneratedNames(%q) with head %v", tc.name, n, typ, tc.head)
		}
	}
}
