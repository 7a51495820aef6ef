package runhook

import (
	"context"
	"testing"
)

// BenchmarkRunStep measures the loop's own cost per step with 8 hooks that do nothing.
func BenchmarkRunStep(b *testing.B) {
	hooks := make([]Hook, 8)
	for i := range hooks {
		hooks[i] = Base{}
	}
	n := int64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	err := Run(context.Background(), hooks, func(_ context.Context, rc *RunContext) error {
		if rc.Step+1 >= n {
			rc.RequestStop()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
