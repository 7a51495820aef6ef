package zk

import (
	"context"
	"errors"
	"fmt"
)

// ReadTree maps every node under root, root included, to its data. A root that does not exist
// gives an empty map, and a node deleted while the tree is read is left out; any other error is
// returned with the path it happened at.
func ReadTree(ctx context.Context, c Client, root string) (map[string]string, error) {
	out := map[string]string{}
	var walk func(p string) error
	walk = func(p string) error {
		data, _, err := c.Get(ctx, p)
		if errors.Is(err, ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tree %s: %w", p, err)
		}
		out[p] = string(data)
		kids, err := c.Children(ctx, p)
		if errors.Is(err, ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tree %s: %w", p, err)
		}
		for _, k := range kids {
			if err := walk(Join(p, k)); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(root)
}
