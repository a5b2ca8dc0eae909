package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/govn/govn/internal/daemon"
	"github.com/govn/govn/ovsdb/server"
	"github.com/govn/govn/schema"
	unixctlpkg "github.com/govn/govn/unixctl"
)

// runDB implements "govn db": serve database files like ovsdb-server, or
// "govn db create FILE SCHEMA".
func runDB(ctx context.Context, args []string) error {
	if len(args) > 0 && isDBTool(args[0]) {
		return runDBTool(ctx, os.Stdout, args) // dbtool.go
	}
	if len(args) > 0 && args[0] == "create" {
		if len(args) != 3 {
			return fmt.Errorf("%w: govn db create FILE SCHEMA (SCHEMA: nb, sb, vswitch or an .ovsschema file)", errUsage)
		}
		return createDB(args[1], args[2])
	}
	opts, err := parseDBFlags(args, os.Getenv)
	if err != nil {
		return err
	}
	env := os.Environ()
	if opts.detach && !daemon.IsChild(env) {
		exe, childArgs, err := detachCommand(os.Args[0], args)
		if err != nil {
			return fmt.Errorf("--detach: %w", err)
		}
		return daemon.Detach(exe, childArgs, env)
	}
	ready := daemon.ChildNotifier(env)
	if err := serveDB(ctx, opts, ready.Ready); err != nil {
		ready.Fail(err)
		return err
	}
	return nil
}

// serveDB serves opts.files until ctx ends or ovs-appctl exit; it calls
// ready once every remote listens and the control socket answers.
func serveDB(ctx context.Context, opts dbOptions, ready func()) error {
	if os.Getenv("GOMAXPROCS") == "" {
		// One P more than CPUs: a thread that wakes from a blocking
		// system call (an fsync, or the fan-out write helper's wait)
		// then finds a P free instead of queueing its goroutine behind
		// the committer until the commit's writes are done.
		// govn bench ovsdb, eight alternating runs: fan-out p50 ratio
		// 0.52 -> 0.48, p99 0.63 -> 0.52, CPU per commit -20%; inserts
		// unchanged or better.
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
	if opts.user != "" {
		cred, err := daemon.LookupUser(opts.user)
		if err != nil {
			return err
		}
		if err := cred.Drop(); err != nil {
			return fmt.Errorf("--user %s: %w", opts.user, err)
		}
	}
	level := slog.LevelInfo
	if opts.verbose {
		level = slog.LevelDebug
	}
	var logOut io.Writer = os.Stderr
	if opts.logFile != "" {
		f, err := os.OpenFile(opts.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening log file: %w", err)
		}
		defer f.Close()
		logOut = f
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	if len(opts.vlog) > 0 {
		logger.Info("ignoring Open vSwitch log settings", "args", opts.vlog)
	}
	if opts.monitor {
		logger.Info("ignoring --monitor: govn db is not restarted after a crash; use a service manager for that")
	}

	if opts.cpuprofile != "" {
		f, err := os.Create(opts.cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// The pidfile comes first: a second govn db on the same pidfile
	// stops here, before it touches the first one's files and sockets.
	if opts.pidfile != "" {
		pf, err := daemon.CreatePidfile(opts.pidfile, opts.overwrite)
		if err != nil {
			return err
		}
		defer pf.Remove()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := server.New(server.Options{Logger: logger})
	for _, path := range opts.files {
		if opts.create != "" {
			if _, err := os.Stat(path); server.IsNotExist(err) {
				if err := createDB(path, opts.create); err != nil {
					return err
				}
			}
		}
		db, log, err := server.OpenFile(path, logger)
		if err != nil {
			return err
		}
		defer closeDBLog(srv, db.Schema.Name, log) // dbtool.go
		if err := srv.AddDatabase(db, log); err != nil {
			return err
		}
		logger.Info("serving database", "name", db.Schema.Name, "file", path)
	}
	rem, err := srv.StartRemotes(ctx, server.RemoteOptions{Remotes: opts.remotes, TLS: opts.tls})
	if err != nil {
		return err
	}
	defer func() { cancel(); rem.Wait() }()
	if path := opts.controlSocket(os.Getpid()); path != "" {
		l, err := unixctlpkg.Listen(path)
		switch {
		case err != nil && opts.unixctl == "" && opts.pidfile == "":
			// ovsdb-server would stop here; govn db, run by hand
			// without --pidfile (nothing to find the socket by),
			// goes on without one, as where the run directory is
			// root's.
			logger.Warn("no control socket; give --unixctl or set OVS_RUNDIR for one", "err", err)
		case err != nil:
			return fmt.Errorf("control socket: %w", err)
		default:
			stop := serveControl(ctx, l, srv, cancel, logger)
			defer func() { stop(); os.Remove(path) }()
		}
	}
	compacted := make(chan struct{})
	go func() {
		defer close(compacted)
		srv.RunCompaction(ctx, 10*time.Second)
	}()
	ready()
	<-ctx.Done()
	// A compaction in progress finishes before the logs are closed.
	<-compacted
	return nil
}

// serveControl answers ovs-appctl commands on l until ctx ends; exit
// calls cancel. The returned stop cancels and waits until the commands
// still running (exit's reply) are answered and the socket is closed.
func serveControl(ctx context.Context, l net.Listener, srv *server.Server, cancel context.CancelFunc, logger *slog.Logger) (stop func()) {
	cmds := map[string]unixctlpkg.Command{
		"exit":        func([]string) (string, error) { cancel(); return "", nil },
		"memory/show": func([]string) (string, error) { return srv.MemoryShow(), nil },
		// The last word is the Open vSwitch release whose OVSDB govn
		// db follows; ovn-ctl stops daemons with "exit" only when it
		// is 2.5.90 or later, and with signals otherwise.
		"version": func([]string) (string, error) { return "govn db (OVSDB of Open vSwitch) 3.1.0\n", nil },
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := unixctlpkg.Serve(ctx, l, cmds); err != nil {
			logger.Error("control socket stopped", "err", err)
		}
	}()
	return func() { cancel(); <-served }
}

// createDB writes an empty database file with a named or file schema.
func createDB(path, name string) error {
	var text []byte
	var err error
	switch name {
	case "nb", "sb", "vswitch":
		text, err = schema.Lookup(name)
	default:
		text, err = os.ReadFile(name)
	}
	if err != nil {
		return fmt.Errorf("reading schema %s: %w", name, err)
	}
	if err := server.CreateFile(path, text); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*m = append(*m, v)
	return nil
}

// splitVlogArgs takes out Open vSwitch log settings ("-vconsole:off",
// "--verbose=file:info"), which ovn-ctl passes to ovsdb-server and which
// govn db accepts without applying; --verbose alone still means debug logs.
func splitVlogArgs(args []string) (rest, vlog []string) {
	for i, a := range args {
		if a == "--" {
			return append(rest, args[i:]...), vlog
		}
		if isVlogArg(a) {
			vlog = append(vlog, a)
			continue
		}
		rest = append(rest, a)
	}
	return rest, vlog
}

func isVlogArg(a string) bool {
	if strings.HasPrefix(a, "--verbose=") || strings.HasPrefix(a, "-verbose=") {
		return true
	}
	// -v, -vSPEC (not -verbose, which package flag parses).
	return strings.HasPrefix(a, "-v") && !strings.HasPrefix(a, "-verbose")
}

// detachCommand returns the program and arguments that run govn db with
// args in a detached child. Run as ovsdb-server (a link to govn), the child
// keeps that name, so that ovn-ctl, which checks the name of the process
// its pidfile names, recognises it.
func detachCommand(argv0 string, args []string) (exe string, childArgs []string, err error) {
	if filepath.Base(argv0) == dbProgramName {
		if strings.Contains(argv0, "/") {
			exe, err = filepath.Abs(argv0)
		} else {
			exe, err = exec.LookPath(argv0)
		}
		if err != nil {
			return "", nil, fmt.Errorf("finding %s: %w", argv0, err)
		}
		return exe, args, nil
	}
	exe, err = os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("finding govn's executable: %w", err)
	}
	return exe, append([]string{"db"}, args...), nil
}
