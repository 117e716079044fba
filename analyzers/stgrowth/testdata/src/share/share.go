// Package share adopts prefixes in loops: the error of AdoptPrefix is the
// error of an appends call.
package share

import "kv"

func adoptAll(heads []*kv.PromptState, keys []int32) int {
	adopted := 0
	for _, s := range heads {
		s.AdoptPrefix(keys) // want `error of \(\*kv.PromptState\).AdoptPrefix is discarded inside a loop; when it fails \(an append once PromptState reaches its bound`
	}
	for _, s := range heads {
		n, _ := s.AdoptPrefix(keys) // want `error of \(\*kv.PromptState\).AdoptPrefix is discarded inside a loop`
		adopted += n
	}
	for _, s := range heads {
		n, err := s.AdoptPrefix(keys) // want `error of \(\*kv.PromptState\).AdoptPrefix is assigned to err but never read inside a loop`
		adopted += n
		if err = s.Append(keys[n:]); err != nil { // overwrites it unread
			return adopted
		}
	}
	return adopted
}

// ---- no findings ----

func prefill(heads []*kv.PromptState, keys []int32) error {
	for _, s := range heads {
		n, err := s.AdoptPrefix(keys)
		if err != nil {
			return err
		}
		if err := s.Append(keys[n:]); err != nil {
			return err
		}
	}
	return nil
}

func firstError(heads []*kv.PromptState, keys []int32) (err error) {
	for _, s := range heads {
		_, err = s.AdoptPrefix(keys) // stored in a named result
	}
	return
}

// Outside a loop, a discarded error is another analyzer's business.
func once(s *kv.PromptState, keys []int32) int {
	n, _ := s.AdoptPrefix(keys)
	return n
}
