package user

import "store"

func fill(s *store.KVCacheState, batches [][]float32) error {
	for _, b := range batches {
		s.Append(b) // want `error of \(\*store.KVCacheState\).Append is discarded inside a loop; when it fails \(an append once KVCacheState reaches its bound`
	}
	for range batches {
		spans, _ := s.AppendDevice(4) // want `error of \(\*store.KVCacheState\).AppendDevice is discarded inside a loop`
		_ = spans
	}
	for _, b := range batches {
		if err := s.Append(b); err != nil {
			return err
		}
	}
	return nil
}
