package utils

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/zk"
)

// PyBytes is how the goldens write a Python bytes value.
func PyBytes(b []byte) map[string]any {
	return map[string]any{"utf8": string(b), "py_repr": pyfmt.BytesRepr(b), "hex": hex.EncodeToString(b)}
}

// SeedReplicas writes a case's seed, [path, ReplicaMeta fields] pairs, into ZooKeeper through w,
// as registering replicas would: the recorded watcher cases start from such a tree.
func SeedReplicas(ctx context.Context, w zk.Client, seed [][2]json.RawMessage) error {
	for i, s := range seed {
		var path string
		if err := json.Unmarshal(s[0], &path); err != nil {
			return &harness.InputError{Key: fmt.Sprintf("seed[%d]", i), Msg: err.Error()}
		}
		meta, err := datadef.DeserializeReplicaMeta(s[1])
		if err != nil {
			return &harness.InputError{Key: fmt.Sprintf("seed[%d]", i), Msg: err.Error()}
		}
		if _, err := w.Create(ctx, path, meta.Serialize(), zk.CreateOptions{MakePath: true}); err != nil {
			return fmt.Errorf("seed %s: %w", path, err)
		}
	}
	return nil
}
