package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

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
	const synopsis = "govn db [--remote=REMOTE]... [--private-key=FILE --certificate=FILE --ca-cert=FILE] [--unixctl=PATH] [--pidfile=PATH] [--log-file=PATH] [--create=SCHEMA] FILE...\n       govn db create FILE SCHEMA\n       " + dbToolUsage + "\n  REMOTE: punix:PATH, ptcp:PORT[:IP], pssl:PORT[:IP] (listen); unix:PATH, tcp:IP:PORT, ssl:IP:PORT (connect out);\n          db:DB,TABLE,COLUMN (the targets in that column, e.g. db:OVN_Northbound,NB_Global,connections, followed as it changes)\n  FILE options: a file name or db:DB,TABLE,COLUMN (e.g. db:OVN_Northbound,SSL,private_key)"
	fs := flag.NewFlagSet("govn db", flag.ContinueOnError)
	var remotes multiFlag
	fs.Var(&remotes, "remote", "serve `REMOTE` (see above); repeatable")
	var tlsOpts server.TLSOptions
	fs.StringVar(&tlsOpts.PrivateKey, "private-key", "", "SSL private key `FILE` or db:DB,TABLE,COLUMN")
	fs.StringVar(&tlsOpts.Certificate, "certificate", "", "SSL certificate `FILE` or db:DB,TABLE,COLUMN")
	fs.StringVar(&tlsOpts.CACert, "ca-cert", "", "SSL CA certificate `FILE` or db:DB,TABLE,COLUMN; peers must present a certificate it signed")
	fs.StringVar(&tlsOpts.Protocols, "ssl-protocols", "", "allowed SSL `PROTOCOLS` (TLSv1,TLSv1.1,TLSv1.2,TLSv1.3; default TLSv1.2 and later) or db:DB,TABLE,COLUMN")
	fs.StringVar(&tlsOpts.Ciphers, "ssl-ciphers", "", "accepted (also as db:DB,TABLE,COLUMN) for ovsdb-server compatibility; Go's cipher suites are used")
	unixctl := fs.String("unixctl", "", "answer ovs-appctl commands on the unix socket `PATH`")
	pidfile := fs.String("pidfile", "", "write the process id to `PATH`")
	create := fs.String("create", "", "create each missing FILE with `SCHEMA` (nb, sb, vswitch or a path)")
	verbose := fs.Bool("verbose", false, "log debug messages")
	logFile := fs.String("log-file", "", "append logs to `PATH` instead of standard error")
	fs.Bool("no-chdir", true, "accepted for ovsdb-server compatibility (govn db never changes directory)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to `FILE` until exit")
	args, vlog := splitVlogArgs(args)
	if err := parseFlags(fs, args, synopsis); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: no database FILE\nusage: %s", errUsage, synopsis)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	var logOut io.Writer = os.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening log file: %w", err)
		}
		defer f.Close()
		logOut = f
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	if len(vlog) > 0 {
		logger.Info("ignoring Open vSwitch log settings", "args", vlog)
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := server.New(server.Options{Logger: logger})
	for _, path := range fs.Args() {
		if *create != "" {
			if _, err := os.Stat(path); server.IsNotExist(err) {
				if err := createDB(path, *create); err != nil {
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
	if *pidfile != "" {
		if err := os.WriteFile(*pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing pidfile: %w", err)
		}
		defer os.Remove(*pidfile)
	}
	rem, err := srv.StartRemotes(ctx, server.RemoteOptions{Remotes: remotes, TLS: tlsOpts})
	if err != nil {
		return err
	}
	defer func() { cancel(); rem.Wait() }()
	if *unixctl != "" {
		l, err := unixctlpkg.Listen(*unixctl)
		if err != nil {
			return err
		}
		defer os.Remove(*unixctl)
		cmds := map[string]unixctlpkg.Command{
			"exit":        func([]string) (string, error) { cancel(); return "", nil },
			"memory/show": func([]string) (string, error) { return srv.MemoryShow(), nil },
			"version":     func([]string) (string, error) { return "govn db\n", nil },
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := unixctlpkg.Serve(ctx, l, cmds); err != nil {
				logger.Error("control socket stopped", "err", err)
			}
		}()
		// Serve answers the commands still running (exit's reply) and
		// closes the socket before the file goes.
		defer func() { cancel(); <-served }()
	}
	compacted := make(chan struct{})
	go func() {
		defer close(compacted)
		srv.RunCompaction(ctx, 10*time.Second)
	}()
	<-ctx.Done()
	// A compaction in progress finishes before the logs are closed.
	<-compacted
	return nil
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
