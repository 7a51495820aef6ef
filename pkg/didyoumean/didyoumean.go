// Package didyoumean finds the name a mistyped one was meant to be, for the "did you mean"s of
// errors about names (config keys, schema features).
package didyoumean

import (
	"strings"
	"unicode/utf8"
)

// Suggest returns the candidate that name is most likely a typo of, or "" when none is near:
// the nearest by case-insensitive Distance, if it is at most a third of name's length (at least
// 1) and fewer than name's length. Ties go to the earlier candidate.
func Suggest(name string, candidates []string) string {
	best, bestDist := "", -1
	lower := strings.ToLower(name)
	for _, c := range candidates {
		if d := Distance(lower, strings.ToLower(c)); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	n := utf8.RuneCountInString(name)
	if bestDist < 0 || bestDist > max(1, (n+2)/3) || bestDist >= n {
		return ""
	}
	return best
}

// Distance is the optimal string alignment distance of a and b, in runes: insertions, deletions,
// substitutions and swaps of neighbours each cost 1 (agent_versoin is 1 from agent_version).
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2, prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
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
