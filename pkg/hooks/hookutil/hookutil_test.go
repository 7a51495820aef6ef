package hookutil

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// recorder records the calls it gets.
type recorder struct {
	calls []string
	stop  bool
	err   error
}

func (r *recorder) Begin(context.Context) error { r.calls = append(r.calls, "Begin"); return r.err }
func (r *recorder) BeforeSave(_ context.Context, step int64) error {
	r.calls = append(r.calls, fmt.Sprintf("BeforeSave(%d)", step))
	return r.err
}
func (r *recorder) AfterSave(_ context.Context, step int64) (bool, error) {
	r.calls = append(r.calls, fmt.Sprintf("AfterSave(%d)", step))
	return r.stop, r.err
}
func (r *recorder) End(_ context.Context, step int64) error {
	r.calls = append(r.calls, fmt.Sprintf("End(%d)", step))
	return r.err
}
func (r *recorder) String() string { return "recorder" }

// drive calls every method of l, as a saver hook would around one save.
func drive(l SaverListener) (stop bool, errs []error) {
	ctx := context.Background()
	errs = append(errs, l.Begin(ctx), l.BeforeSave(ctx, 7))
	stop, err := l.AfterSave(ctx, 7)
	errs = append(errs, err, l.End(ctx, 7))
	return stop, errs
}

// The reference's testBeforeAfterSaverListener, with the calls each wrapper forwards checked.
func TestBeforeAfterSaverListener(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		wrap      func(SaverListener) SaverListener
		base      recorder
		wantCalls []string
		wantStop  bool
		wantErrs  []error
	}{
		{
			name:      "base listener does nothing",
			wrap:      func(SaverListener) SaverListener { return BaseListener{} },
			wantErrs:  []error{nil, nil, nil, nil},
			wantCalls: nil,
		},
		{
			name:      "before save only",
			wrap:      func(l SaverListener) SaverListener { return BeforeSave(l) },
			base:      recorder{stop: true, err: boom},
			wantCalls: []string{"BeforeSave(7)"},
			wantErrs:  []error{nil, boom, nil, nil},
		},
		{
			name:      "after save only, stop forwarded",
			wrap:      func(l SaverListener) SaverListener { return AfterSave(l) },
			base:      recorder{stop: true},
			wantCalls: []string{"AfterSave(7)"},
			wantStop:  true,
			wantErrs:  []error{nil, nil, nil, nil},
		},
		{
			name:      "after save error forwarded",
			wrap:      func(l SaverListener) SaverListener { return AfterSave(l) },
			base:      recorder{err: boom},
			wantCalls: []string{"AfterSave(7)"},
			wantErrs:  []error{nil, nil, boom, nil},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base
			stop, errs := drive(tc.wrap(&base))
			if !reflect.DeepEqual(base.calls, tc.wantCalls) {
				t.Errorf("calls %q, want %q", base.calls, tc.wantCalls)
			}
			if stop != tc.wantStop {
				t.Errorf("stop %v, want %v", stop, tc.wantStop)
			}
			for i := range errs {
				if !errors.Is(errs[i], tc.wantErrs[i]) || (errs[i] == nil) != (tc.wantErrs[i] == nil) {
					t.Errorf("error %d = %v, want %v", i, errs[i], tc.wantErrs[i])
				}
			}
		})
	}
}

func TestString(t *testing.T) {
	r := &recorder{}
	if got := BeforeSave(r).String(); got != "BeforeSaveListener(recorder)" {
		t.Errorf("BeforeSave String = %q", got)
	}
	if got := AfterSave(r).String(); got != "AfterSaveListener(recorder)" {
		t.Errorf("AfterSave String = %q", got)
	}
}
