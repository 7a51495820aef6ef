// Package hookutil is the reference's hooks/hook_utils: the checkpoint-saver listener interface
// (TensorFlow's CheckpointSaverListener) and wrappers that forward only the before-save or only the
// after-save calls of a listener, so one listener can be split around other save work.
package hookutil

import (
	"context"
	"fmt"
)

// SaverListener is told about the checkpoint saves of a saver hook (TensorFlow's
// CheckpointSaverListener). The reference passes the session too; a Go listener holds what it
// needs itself.
type SaverListener interface {
	// Begin is called once before the first save.
	Begin(ctx context.Context) error
	// BeforeSave is called before each save at globalStep.
	BeforeSave(ctx context.Context, globalStep int64) error
	// AfterSave is called after each save at globalStep; stop asks the training to stop.
	AfterSave(ctx context.Context, globalStep int64) (stop bool, err error)
	// End is called once after the last save, at globalStep.
	End(ctx context.Context, globalStep int64) error
}

// BaseListener implements SaverListener with methods that do nothing (TensorFlow's
// CheckpointSaverListener base class). Embed it to implement only some methods.
type BaseListener struct{}

// Begin does nothing.
func (BaseListener) Begin(context.Context) error { return nil }

// BeforeSave does nothing.
func (BaseListener) BeforeSave(context.Context, int64) error { return nil }

// AfterSave does nothing and does not ask to stop.
func (BaseListener) AfterSave(context.Context, int64) (bool, error) { return false, nil }

// End does nothing.
func (BaseListener) End(context.Context, int64) error { return nil }

var (
	_ SaverListener = BaseListener{}
	_ SaverListener = (*BeforeSaveListener)(nil)
	_ SaverListener = (*AfterSaveListener)(nil)
)

// BeforeSaveListener forwards only BeforeSave to its listener (the reference's BeforeSaveListener).
type BeforeSaveListener struct {
	BaseListener
	Listener SaverListener
}

// BeforeSave returns a listener that forwards only BeforeSave to l.
func BeforeSave(l SaverListener) *BeforeSaveListener { return &BeforeSaveListener{Listener: l} }

// BeforeSave calls the wrapped listener's BeforeSave.
func (b *BeforeSaveListener) BeforeSave(ctx context.Context, globalStep int64) error {
	return b.Listener.BeforeSave(ctx, globalStep)
}

// String names the wrapper and the wrapped listener.
func (b *BeforeSaveListener) String() string {
	return fmt.Sprintf("BeforeSaveListener(%v)", b.Listener)
}

// AfterSaveListener forwards only AfterSave to its listener (the reference's AfterSaveListener).
type AfterSaveListener struct {
	BaseListener
	Listener SaverListener
}

// AfterSave returns a listener that forwards only AfterSave to l.
func AfterSave(l SaverListener) *AfterSaveListener { return &AfterSaveListener{Listener: l} }

// AfterSave calls the wrapped listener's AfterSave.
func (a *AfterSaveListener) AfterSave(ctx context.Context, globalStep int64) (bool, error) {
	return a.Listener.AfterSave(ctx, globalStep)
}

// String names the wrapper and the wrapped listener.
func (a *AfterSaveListener) String() string { return fmt.Sprintf("AfterSaveListener(%v)", a.Listener) }
