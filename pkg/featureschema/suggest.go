package featureschema

import "github.com/monolith-go/monolith/pkg/didyoumean"

// Suggest returns the candidate that name is most likely a typo of, or "" when none is near
// (didyoumean.Suggest). The schema decoder's "did you mean" for keys and values uses the same
// rule, and so does the trainer for a feature the records do not have.
func Suggest(name string, candidates []string) string { return didyoumean.Suggest(name, candidates) }
