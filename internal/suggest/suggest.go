// Package suggest finds what a user probably meant by a misspelt name
// ("did you mean"): a command, a flag, a backend, a fault, a field.
package suggest

import "strings"

// Closest returns the candidate nearest to word by edit distance, or ""
// when none is close enough to be a likely typo: at most a third of the
// word's length in edits (and at least one), or a candidate that word is
// a prefix of.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := distance(w, strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := len(w) / 3
	if limit < 1 {
		limit = 1
	}
	if best != "" && bestD <= limit {
		return best
	}
	for _, c := range candidates {
		if len(w) >= 3 && strings.HasPrefix(strings.ToLower(c), w) {
			return c
		}
	}
	return ""
}

// Hint is ` (did you mean "x"?)` for the closest candidate, or "".
func Hint(word string, candidates []string) string {
	if c := Closest(word, candidates); c != "" && c != word {
		return ` (did you mean "` + c + `"?)`
	}
	return ""
}

// distance is the Damerau–Levenshtein (optimal string alignment) distance:
// insertions, deletions, substitutions and swaps of neighbours count one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
