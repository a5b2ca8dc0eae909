package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"

	"github.com/govn/govn/internal/daemon"
)

// runDaemon runs serve, or with detach starts a child that does: "govn
// sub args", run as program when govn was invoked under that name (a
// link named for the daemon it stands in for, which ovn-ctl and ovs-ctl
// expect the pidfile's process to keep). The child tells the parent once
// serve calls ready, or why it failed.
func runDaemon(ctx context.Context, detach bool, program, sub string, args []string,
	serve func(ctx context.Context, ready func()) error) error {
	env := os.Environ()
	if detach && !daemon.IsChild(env) {
		exe, childArgs, err := programCommand(os.Args[0], program, sub, args)
		if err != nil {
			return fmt.Errorf("--detach: %w", err)
		}
		return daemon.Detach(exe, childArgs, env)
	}
	ready := daemon.ChildNotifier(env)
	if err := serve(ctx, ready.Ready); err != nil {
		ready.Fail(err)
		return err
	}
	return nil
}

// openDaemonLog returns where a daemon logs: the --log-file, appended
// to, or standard error; and the level --verbose asks for. close closes
// the file.
func openDaemonLog(logFile string, verbose bool) (out io.Writer, level slog.Level, close func(), err error) {
	level = slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	if logFile == "" {
		return os.Stderr, level, func() {}, nil
	}
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, level, nil, fmt.Errorf("opening log file: %w", err)
	}
	return f, level, func() { f.Close() }, nil
}

// startCPUProfile starts a CPU profile of the whole run into path (the
// daemons' --cpuprofile); stop ends it and closes the file. With path
// empty it does nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
