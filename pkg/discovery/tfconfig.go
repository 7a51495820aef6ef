package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// TFConfig is the Primus discovery (TfConfigServiceDiscovery): the cluster is TF_CONFIG's, fixed
// for the job's life. Register and Deregister do nothing; Query("worker") lists the chief first
// (index 0) and the workers after it.
//
// TF_CONFIG is read lazily, as the reference read its dict: a missing or ill-typed part is an
// error of the call that needs it (kind NotFound for a missing key, Type for a wrong type).
type TFConfig struct {
	cluster    map[string]json.RawMessage // nil when TF_CONFIG has no "cluster"
	hasCluster bool
	task       map[string]json.RawMessage
	hasTask    bool

	mu     sync.Mutex
	closed bool
}

var _ ServiceDiscovery = (*TFConfig)(nil)

// NewTFConfig parses TF_CONFIG's JSON text. Text that is not JSON is an error of kind Value (the
// reference's json.loads failed); JSON that is not an object, or a "cluster" or "task" that is not
// one, is an error of kind Type (the reference's TypeError indexing it with a key).
func NewTFConfig(tfConfig string) (*TFConfig, error) {
	// One decode: Unmarshal checks the whole text is JSON before it fills top, so a syntax error
	// is the text's, any other failure (or null) the value's type.
	var top map[string]json.RawMessage
	err := json.Unmarshal([]byte(tfConfig), &top)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return nil, errkind.New(errkind.Value, "TF_CONFIG is not JSON: %w", err)
	}
	if err != nil || top == nil {
		return nil, errkind.New(errkind.Type, "TF_CONFIG is not a JSON object: %.60s", tfConfig)
	}
	d := &TFConfig{}
	if raw, ok := top["cluster"]; ok {
		if err := json.Unmarshal(raw, &d.cluster); err != nil || d.cluster == nil {
			return nil, errkind.New(errkind.Type, "TF_CONFIG cluster is not an object: %s", raw)
		}
		d.hasCluster = true
	}
	if raw, ok := top["task"]; ok {
		if err := json.Unmarshal(raw, &d.task); err != nil || d.task == nil {
			return nil, errkind.New(errkind.Type, "TF_CONFIG task is not an object: %s", raw)
		}
		d.hasTask = true
	}
	return d, nil
}

func (d *TFConfig) usable() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return nil
}

// Register does nothing: Primus publishes the cluster.
func (d *TFConfig) Register(context.Context, string, int, string) error { return d.usable() }

// Deregister does nothing.
func (d *TFConfig) Deregister(context.Context, string, int, string) error { return d.usable() }

// Query returns the addresses of "ps" (cluster.ps) or "worker" (cluster.chief, then
// cluster.worker), numbered from 0. Any other name is an error of kind Value.
func (d *TFConfig) Query(_ context.Context, name string) (map[int]string, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	var addrs []string
	switch name {
	case "ps":
		list, err := d.clusterList("ps")
		if err != nil {
			return nil, err
		}
		addrs = list
	case "worker":
		if d.hasCluster {
			if _, ok := d.cluster["chief"]; ok {
				chief, err := d.clusterList("chief")
				if err != nil {
					return nil, err
				}
				addrs = append(addrs, chief...)
			}
		}
		workers, err := d.clusterList("worker")
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, workers...)
	default:
		return nil, errkind.New(errkind.Value, "name must be ps/worker, got %q", name)
	}
	out := make(map[int]string, len(addrs))
	for i, a := range addrs {
		out[i] = a
	}
	return out, nil
}

// ServerType is the task's server type: "worker" for the chief, else the task's type.
func (d *TFConfig) ServerType() (string, error) {
	typ, err := d.taskType()
	if err != nil {
		return "", err
	}
	if typ == "chief" {
		return "worker", nil
	}
	return typ, nil
}

// Index is the task's index among its server type's Query: a worker's index plus 1 when the
// cluster has a chief (the chief is worker 0), else the task's index.
func (d *TFConfig) Index() (int, error) {
	if !d.hasCluster {
		return 0, errkind.New(errkind.NotFound, "TF_CONFIG has no cluster")
	}
	_, hasChief := d.cluster["chief"]
	if !hasChief {
		return d.taskIndex()
	}
	typ, err := d.taskType()
	if err != nil {
		return 0, err
	}
	idx, err := d.taskIndex()
	if err != nil {
		return 0, err
	}
	if typ == "worker" {
		return idx + 1, nil
	}
	return idx, nil
}

// Addr is the task's own address: cluster[task.type][task.index]. An index outside the list is an
// error of kind NotFound.
func (d *TFConfig) Addr() (string, error) {
	typ, err := d.taskType()
	if err != nil {
		return "", err
	}
	list, err := d.clusterList(typ)
	if err != nil {
		return "", err
	}
	idx, err := d.taskIndex()
	if err != nil {
		return "", err
	}
	if idx < 0 || idx >= len(list) {
		return "", errkind.New(errkind.NotFound, "TF_CONFIG task index %d is outside cluster.%s (%d addresses)", idx, typ, len(list))
	}
	return list[idx], nil
}

// Close marks the discovery closed.
func (d *TFConfig) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}

func (d *TFConfig) clusterList(key string) ([]string, error) {
	if !d.hasCluster {
		return nil, errkind.New(errkind.NotFound, "TF_CONFIG has no cluster")
	}
	raw, ok := d.cluster[key]
	if !ok {
		return nil, errkind.New(errkind.NotFound, "TF_CONFIG cluster has no %q", key)
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errkind.New(errkind.Type, "TF_CONFIG cluster.%s is not a list of addresses: %s", key, raw)
	}
	return list, nil
}

func (d *TFConfig) taskType() (string, error) {
	raw, err := d.taskField("type")
	if err != nil {
		return "", err
	}
	var typ string
	if err := json.Unmarshal(raw, &typ); err != nil {
		return "", errkind.New(errkind.Type, "TF_CONFIG task.type is not a string: %s", raw)
	}
	return typ, nil
}

// taskIndex is task.index, which must be an integer: the reference used it as a list index and
// added 1 to it, so a string index raised a TypeError (or, without a chief, was returned as is).
func (d *TFConfig) taskIndex() (int, error) {
	raw, err := d.taskField("index")
	if err != nil {
		return 0, err
	}
	var idx int
	if err := json.Unmarshal(raw, &idx); err != nil {
		return 0, errkind.New(errkind.Type, "TF_CONFIG task.index is not an integer: %s", raw)
	}
	return idx, nil
}

func (d *TFConfig) taskField(key string) (json.RawMessage, error) {
	if !d.hasTask {
		return nil, errkind.New(errkind.NotFound, "TF_CONFIG has no task")
	}
	raw, ok := d.task[key]
	if !ok {
		return nil, errkind.New(errkind.NotFound, "TF_CONFIG task has no %q", key)
	}
	return raw, nil
}
