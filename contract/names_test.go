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
}
