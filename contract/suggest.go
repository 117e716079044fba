package contract

import "strings"

// nearest returns the candidate closest to word by edit distance, or "" when
// none is close enough to be a plausible misspelling.
func nearest(word string, candidates []string) string {
	lw := strings.ToLower(word)
	best, bestD := "", -1
	for _, c := range candidates {
		d := distance(lw, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 {
		return ""
	}
	limit := 2
	if len(best) <= 4 {
		limit = 1
	}
	if bestD > limit || bestD >= len(lw) && lw != "" {
		// Allow case-only differences regardless of length.
		if bestD == 0 {
			return best
		}
		return ""
	}
	return best
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent bytes
// each cost one.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Long words are never misspellings of a short verb or key.
		return 1 << 20
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
