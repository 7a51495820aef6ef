// Package modelparams is monolith/core/base_model_params.py: the params holder of a single-task
// model, which says how to build its task's params.
package modelparams

import "github.com/monolith-go/monolith/pkg/errkind"

// SingleTaskModelParams is implemented by every single-task model's params; P is the task's
// params type (for an embedding task, embeddingtask.Params).
type SingleTaskModelParams[P any] interface {
	// Task returns the task params.
	Task() (P, error)
}

// TaskFunc adapts a function to SingleTaskModelParams.
type TaskFunc[P any] func() (P, error)

// Task calls f; a nil f is the abstract method of the reference and fails as it does.
func (f TaskFunc[P]) Task() (P, error) {
	if f == nil {
		var zero P
		return zero, errkind.New(errkind.Runtime, "Abstract method")
	}
	return f()
}
