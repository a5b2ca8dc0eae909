package chassisbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
)

// tb lets the bench build its clusters with package hvtest, whose helpers
// take a testing.TB, outside a test. It implements the methods hvtest
// calls; the embedded interface is nil, so any other panics, which
// withTB reports as a bug. Fatal and Skip end the work by panicking with
// abort, which withTB recovers, and become its error.
type tb struct {
	testing.TB
	log      *slog.Logger
	err      error
	cleanups []func()
}

// abort is the panic value of Fatal and Skip.
type abort struct{}

// withTB runs f with a fresh tb, then its cleanups, last added first, and
// returns the first failure.
func withTB(log *slog.Logger, f func(t *tb)) (err error) {
	t := &tb{log: log}
	defer func() {
		r := recover()
		if r != nil {
			if _, ok := r.(abort); !ok {
				t.fail(fmt.Errorf("chassisbench: panic: %v", r))
			}
		}
		t.runCleanups()
		err = t.err
	}()
	f(t)
	return nil
}

func (t *tb) runCleanups() {
	for len(t.cleanups) > 0 {
		f := t.cleanups[len(t.cleanups)-1]
		t.cleanups = t.cleanups[:len(t.cleanups)-1]
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(abort); !ok {
						t.fail(fmt.Errorf("chassisbench: panic in cleanup: %v", r))
					}
				}
			}()
			f()
		}()
	}
}

func (t *tb) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

func (t *tb) Helper()          {}
func (t *tb) Name() string     { return "chassisbench" }
func (t *tb) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (t *tb) Failed() bool     { return t.err != nil }

// Log and Logf say what hvtest reports: detail, unless something failed
// (then it is why).
func (t *tb) Log(args ...any) { t.Logf("%s", fmt.Sprint(args...)) }
func (t *tb) Logf(format string, args ...any) {
	level := slog.LevelDebug
	if t.err != nil {
		level = slog.LevelWarn
	}
	t.log.Log(context.Background(), level, fmt.Sprintf(format, args...))
}

func (t *tb) Error(args ...any)                 { t.fail(errors.New(fmt.Sprint(args...))) }
func (t *tb) Errorf(format string, args ...any) { t.fail(fmt.Errorf(format, args...)) }
func (t *tb) Fail()                             { t.fail(errors.New("failed")) }
func (t *tb) FailNow()                          { t.Fail(); panic(abort{}) }
func (t *tb) Fatal(args ...any)                 { t.Error(args...); panic(abort{}) }
func (t *tb) Fatalf(format string, args ...any) { t.Errorf(format, args...); panic(abort{}) }

func (t *tb) Skip(args ...any) {
	t.fail(fmt.Errorf("cannot run here: %s", fmt.Sprint(args...)))
	panic(abort{})
}
func (t *tb) Skipf(format string, args ...any) { t.Skip(fmt.Sprintf(format, args...)) }
func (t *tb) SkipNow()                         { t.Skip("skipped") }
func (t *tb) Skipped() bool                    { return false }
