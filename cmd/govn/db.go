package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/internal/daemon"
	"github.com/govn/govn/internal/metrics"
	"github.com/govn/govn/ovsdb/cluster"
	"github.com/govn/govn/ovsdb/server"
	unixctlpkg "github.com/govn/govn/unixctl"
)

// dbCommand is "govn db": serve database files like ovsdb-server, and the
// offline database commands.
func dbCommand() *command {
	return &command{
		name:    "db",
		summary: "serve OVSDB databases, as ovsdb-server does (ovn-nbctl, ovn-sbctl and ovn-northd work against it)",
		usage: "[--remote=REMOTE]... [--create=SCHEMA] [--pidfile[=PATH]] [--detach] [FLAGS] FILE...\n" +
			"  (example: govn db --create=nb --remote=punix:/tmp/govn-nb.sock /tmp/govn-nb.db)",
		details: dbDetails,
		maxArgs: -1,
		setup: func(fs *flag.FlagSet) leaf {
			d := defineDBFlags(fs, os.Getenv)
			return leaf{prepare: d.prepare, run: func(ctx context.Context, _ stdio, files []string) error {
				opts, err := d.finish(files)
				if err != nil {
					return err
				}
				return startDB(ctx, opts, d.args)
			}}
		},
		subs: append([]*command{{
			name:    "create",
			summary: "create an empty database FILE with SCHEMA (nb, sb, vswitch or an .ovsschema file)",
			usage:   "FILE SCHEMA",
			minArgs: 2, maxArgs: 2,
			setup: noFlags(func(_ context.Context, _ stdio, args []string) error {
				return createDB(args[0], args[1])
			}),
		}, {
			name:    "create-cluster",
			summary: "create a clustered database FILE with SCHEMA for a cluster of one server at LOCAL (tcp:IP:PORT or ssl:IP:PORT), as ovsdb-tool create-cluster",
			usage:   "FILE SCHEMA LOCAL",
			minArgs: 3, maxArgs: 3,
			setup: noFlags(func(_ context.Context, _ stdio, args []string) error {
				return createClusterDB(args[0], args[1], args[2])
			}),
		}, {
			name:    "join-cluster",
			summary: "create a clustered database FILE for a server at LOCAL to join the cluster of DBNAME at REMOTE..., as ovsdb-tool join-cluster",
			usage:   "FILE DBNAME LOCAL REMOTE...",
			minArgs: 4, maxArgs: -1,
			setup: noFlags(func(_ context.Context, _ stdio, args []string) error {
				if err := cluster.Join(args[0], args[1], args[2], args[3:]); err != nil {
					return fmt.Errorf("joining %s: %w", args[0], err)
				}
				return nil
			}),
		}}, dbToolCommands()...),
	}
}

// runDB runs "govn db" serving with the command line args (ovsdb-server's
// options and files).
func runDB(ctx context.Context, args []string) error {
	opts, err := parseDBFlags(args, os.Getenv)
	if err != nil {
		return err
	}
	return startDB(ctx, opts, args)
}

// startDB serves opts, or with --detach starts a child that does, run
// with args.
func startDB(ctx context.Context, opts dbOptions, args []string) error {
	if opts.create != "" {
		if _, err := readSchema(opts.create); err != nil {
			return fmt.Errorf("%w: --create=%s: %v", errUsage, opts.create, err)
		}
	}
	return runDaemon(ctx, opts.detach, dbProgramName, "db", args,
		func(ctx context.Context, ready func()) error { return serveDB(ctx, opts, ready) })
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
	logOut, level, closeLog, err := openDaemonLog(opts.logFile, opts.verbose)
	if err != nil {
		return err
	}
	defer closeLog()
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	if len(opts.vlog) > 0 {
		logger.Info("ignoring Open vSwitch log settings", "args", opts.vlog)
	}
	if opts.monitor {
		logger.Info("ignoring --monitor: govn db is not restarted after a crash; use a service manager for that")
	}

	stopProfile, err := startCPUProfile(opts.cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
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
	nodes := map[string]*cluster.Node{}
	copts := cluster.Options{Logger: logger}
	if opts.tls.PrivateKey != "" || opts.tls.Certificate != "" || opts.tls.CACert != "" {
		// As ovsdb-server's, the SSL options authenticate ssl: peers too.
		if t, err := srv.TLSConfigs(opts.tls); err == nil {
			copts.TLS = t
		}
	}
	for _, path := range opts.files {
		if cluster.IsClusterFile(path) {
			n, err := cluster.Start(ctx, path, srv, copts)
			if err != nil {
				return err
			}
			defer n.Close()
			nodes[n.Name()] = n
			logger.Info("serving clustered database", "name", n.Name(), "file", path)
			continue
		}
		if opts.create != "" {
			if _, err := os.Stat(path); server.IsNotExist(err) {
				if err := createDB(path, opts.create); err != nil {
					return err
				}
			}
		}
		db, log, err := server.OpenFile(path, logger)
		if server.IsNotExist(err) && opts.create == "" {
			return fmt.Errorf("database %s does not exist; add --create=SCHEMA to create it (SCHEMA: %s)", path, schemaNames)
		}
		if err != nil {
			return err
		}
		defer closeDBLog(srv, db.Schema.Name, log) // dbtool.go
		if err := srv.AddDatabase(db, log); err != nil {
			return err
		}
		logger.Info("serving database", "name", db.Schema.Name, "file", path)
	}
	if err := startMetrics(ctx, opts.metrics, logger, func(reg *prometheus.Registry) {
		reg.MustRegister(metrics.DB(srv.Stats))
	}); err != nil {
		return err
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
			stop := serveControl(ctx, l, srv, nodes, cancel, logger)
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
func serveControl(ctx context.Context, l net.Listener, srv *server.Server, nodes map[string]*cluster.Node, cancel context.CancelFunc, logger *slog.Logger) (stop func()) {
	cmds := map[string]unixctlpkg.Command{
		"exit":        func([]string) (string, error) { cancel(); return "", nil },
		"memory/show": func([]string) (string, error) { return srv.MemoryShow(), nil },
		// The last word is the Open vSwitch release whose OVSDB govn
		// db follows; ovn-ctl stops daemons with "exit" only when it
		// is 2.5.90 or later, and with signals otherwise.
		"version": func([]string) (string, error) { return "govn db (OVSDB of Open vSwitch) 3.1.0\n", nil },
	}
	maps.Copy(cmds, clusterCommands(ctx, nodes))
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := unixctlpkg.Serve(ctx, l, cmds); err != nil {
			logger.Error("control socket stopped", "err", err)
		}
	}()
	return func() { cancel(); <-served }
}

// clusterCommands are ovsdb-server's cluster/* control commands for the
// clustered databases served, each taking the database's name first.
func clusterCommands(ctx context.Context, nodes map[string]*cluster.Node) map[string]unixctlpkg.Command {
	node := func(args []string, n int, usage string) (*cluster.Node, error) {
		if len(args) != n {
			return nil, fmt.Errorf("usage: %s", usage)
		}
		nd := nodes[args[0]]
		if nd == nil {
			return nil, fmt.Errorf("%s: no such clustered database", args[0])
		}
		return nd, nil
	}
	return map[string]unixctlpkg.Command{
		"cluster/status": func(args []string) (string, error) {
			n, err := node(args, 1, "cluster/status DB")
			if err != nil {
				return "", err
			}
			return n.Status(), nil
		},
		"cluster/cid": func(args []string) (string, error) {
			n, err := node(args, 1, "cluster/cid DB")
			if err != nil {
				return "", err
			}
			if n.CID() == "" {
				return "", errors.New("cluster ID not yet known")
			}
			return n.CID() + "\n", nil
		},
		"cluster/sid": func(args []string) (string, error) {
			n, err := node(args, 1, "cluster/sid DB")
			if err != nil {
				return "", err
			}
			return n.SID() + "\n", nil
		},
		"cluster/kick": func(args []string) (string, error) {
			n, err := node(args, 2, "cluster/kick DB SERVER")
			if err != nil {
				return "", err
			}
			return n.Kick(ctx, args[1])
		},
		"cluster/leave": func(args []string) (string, error) {
			n, err := node(args, 1, "cluster/leave DB")
			if err != nil {
				return "", err
			}
			return "", n.Leave(ctx)
		},
		"cluster/change-election-timer": func(args []string) (string, error) {
			n, err := node(args, 2, "cluster/change-election-timer DB TIME")
			if err != nil {
				return "", err
			}
			return n.ChangeElectionTimer(ctx, args[1])
		},
	}
}

// createClusterDB writes a clustered database file for a one-server
// cluster with a named or file schema.
func createClusterDB(path, schemaName, local string) error {
	text, err := readSchema(schemaName)
	if err != nil {
		return err
	}
	if err := cluster.Create(path, text, local); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// createDB writes an empty database file with a named or file schema.
func createDB(path, name string) error {
	text, err := readSchema(name)
	if err != nil {
		return err
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

// programCommand returns the program and arguments that run "govn sub
// args" in a child. Run as program (a link to govn named for the daemon it
// stands in for), the child keeps that name.
func programCommand(argv0, program, sub string, args []string) (exe string, childArgs []string, err error) {
	if filepath.Base(argv0) == program {
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
	return exe, append([]string{sub}, args...), nil
}
