package refcases

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/zk"
)

// DumpTrees maps every node under the roots (roots included, when they exist) to its data: the
// form of a case's TreeAfter. Errors other than a missing node fail the test.
func DumpTrees(ctx context.Context, t testing.TB, c zk.Client, roots ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range roots {
		tree, err := zk.ReadTree(ctx, c, r)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(out, tree)
	}
	return out
}

// DiffTrees describes, a line per node in path order, how the tree got differs from want ("" when
// they are equal).
func DiffTrees(got, want map[string]string) string {
	keys := maps.Clone(want)
	maps.Copy(keys, got)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case !gok:
			b.WriteString("missing " + k + " = " + strconv.Quote(w) + "\n")
		case !wok:
			b.WriteString("extra " + k + " = " + strconv.Quote(g) + "\n")
		case g != w:
			b.WriteString(k + ": got " + strconv.Quote(g) + ", want " + strconv.Quote(w) + "\n")
		}
	}
	return b.String()
}
