package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/internal/daemon"
	"github.com/govn/govn/internal/metrics"
	"github.com/govn/govn/internal/vlog"
	northdaemon "github.com/govn/govn/northd/daemon"
	"github.com/govn/govn/ovsdb/client"
	unixctlpkg "github.com/govn/govn/unixctl"
)

// northdProgramName is the name ovn-northd's defaults are made of (its
// pidfile, control socket and log file), which govn northd keeps so that
// ovn-ctl and "ovn-appctl -t ovn-northd" find it.
const northdProgramName = "ovn-northd"

// northdGCPercent is govn northd's garbage collection target (GOGC) when
// the environment sets none: the heap may grow to 1.5 times what is live
// between collections instead of twice, a little more collection work for
// a third less memory at its peak (memory is a feature of northd; its
// steady state allocates little).
const northdGCPercent = 50

// northdOptions is "govn northd"'s command line, parsed.
type northdOptions struct {
	nb, sb                  []string
	privateKey, cert, caCrt string
	unixctl                 string
	pidfile                 string
	overwrite               bool
	logFile                 string
	detach                  bool
	verbose                 bool
	paused                  bool
	user                    string
	rundir                  string
	vlog                    []string
	metrics                 string // --metrics address; "" for none
	cpuprofile              string // where a CPU profile of the whole run goes
	memprofile              string // where a heap profile at the live heap's peak goes
}

// northdDetails ends govn northd's help.
const northdDetails = `DATABASE: comma-separated unix:PATH, tcp:IP:PORT or ssl:IP:PORT remotes, tried in turn
  (defaults: $OVN_NB_DB or unix:$OVN_RUNDIR/ovnnb_db.sock, $OVN_SB_DB or
  unix:$OVN_RUNDIR/ovnsb_db.sock; OVN_RUNDIR defaults to /var/run/ovn).
Relative --pidfile and --unixctl paths are in $OVN_RUNDIR; without --unixctl the control
socket is $OVN_RUNDIR/ovn-northd.PID.ctl, which ovn-appctl -t ovn-northd finds through the
pidfile. Open vSwitch log options (-vconsole:off, --verbose=...) are accepted and ignored.
Of two govn northd (or ovn-northd) on the same Southbound, the one holding the Southbound
lock ovn_northd is active, the other standby; ovn-appctl status tells which.`

// northdCommand is "govn northd".
func northdCommand() *command {
	return &command{
		name:    "northd",
		summary: "compile the OVN Northbound into the Southbound, as ovn-northd does",
		usage: "[--ovnnb-db=DATABASE] [--ovnsb-db=DATABASE] [-p KEY -c CERT -C CACERT] [--unixctl=PATH]\n" +
			"  [--pidfile[=PATH]] [--log-file[=PATH]] [--detach] [--dry-run]\n" +
			"  (example: govn northd --ovnnb-db=unix:/tmp/govn-nb.sock --ovnsb-db=unix:/tmp/govn-sb.sock)",
		details: northdDetails,
		setup: func(fs *flag.FlagSet) leaf {
			f := defineNorthdFlags(fs, os.Getenv)
			return leaf{prepare: f.prepare, run: func(ctx context.Context, _ stdio, _ []string) error {
				opts, err := f.finish()
				if err != nil {
					return err
				}
				return startNorthd(ctx, opts, f.args)
			}}
		},
	}
}

// northdFlags is govn northd's command line as package flag sees it.
type northdFlags struct {
	o              northdOptions
	rundir, logdir string
	nb, sb         *string
	// args is the command line before prepare rewrote it, for the child
	// of --detach.
	args []string
}

// defineNorthdFlags defines "govn northd"'s options on fs, as ovn-northd
// takes them. getenv reads OVN_NB_DB, OVN_SB_DB, OVN_RUNDIR and
// OVS_LOGDIR: ovn-northd 23.03 keeps its pidfile and control socket in
// OVN_RUNDIR but, whatever its --help says, its default log file in the
// Open vSwitch log directory.
func defineNorthdFlags(fs *flag.FlagSet, getenv func(string) string) *northdFlags {
	f := &northdFlags{
		rundir: envOr(getenv, "OVN_RUNDIR", "/var/run/ovn"),
		logdir: envOr(getenv, "OVS_LOGDIR", "/var/log/openvswitch"),
	}
	o := &f.o
	f.nb = fs.String("ovnnb-db", envOr(getenv, "OVN_NB_DB", "unix:"+filepath.Join(f.rundir, "ovnnb_db.sock")), "connect to the Northbound `DATABASE`")
	f.sb = fs.String("ovnsb-db", envOr(getenv, "OVN_SB_DB", "unix:"+filepath.Join(f.rundir, "ovnsb_db.sock")), "connect to the Southbound `DATABASE`")
	fs.StringVar(&o.privateKey, "private-key", "", "SSL private key `FILE` (for ssl: remotes)")
	fs.StringVar(&o.privateKey, "p", "", "`FILE`: same as --private-key")
	fs.StringVar(&o.cert, "certificate", "", "SSL certificate `FILE`")
	fs.StringVar(&o.cert, "c", "", "`FILE`: same as --certificate")
	fs.StringVar(&o.caCrt, "ca-cert", "", "SSL CA certificate `FILE` that the servers' certificates must be signed by")
	fs.StringVar(&o.caCrt, "C", "", "`FILE`: same as --ca-cert")
	fs.StringVar(&o.unixctl, "unixctl", "", "answer ovn-appctl commands on the unix socket `PATH` (default $OVN_RUNDIR/ovn-northd.PID.ctl)")
	fs.StringVar(&o.pidfile, "pidfile", "", "write the process id to `PATH` and hold it locked (without a value: $OVN_RUNDIR/ovn-northd.pid)")
	fs.BoolVar(&o.overwrite, "overwrite-pidfile", false, "with --pidfile, replace the pidfile even if another process holds it")
	fs.StringVar(&o.logFile, "log-file", "", "append logs to `PATH` instead of standard error (without a value: $OVS_LOGDIR/ovn-northd.log, as for ovn-northd)")
	fs.BoolVar(&o.detach, "detach", false, "run in the background; return once the control socket answers")
	fs.BoolVar(&o.verbose, "verbose", false, "log debug messages")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to `PATH`")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile (go tool pprof) to `PATH` at each new peak of the live heap")
	fs.StringVar(&o.user, "user", "", "run as `USER[:GROUP]` (after starting as root)")
	fs.BoolVar(&o.paused, "dry-run", false, "start paused (ovn-appctl resume starts it)")
	fs.StringVar(&o.metrics, "metrics", "", metricsUsage)
	fs.Bool("no-chdir", true, "accepted for ovn-northd compatibility (govn northd never changes directory)")
	fs.Bool("monitor", false, "accepted for ovn-northd compatibility and ignored: a crashed govn northd is not restarted")
	fs.Int("n-threads", 1, "accepted for ovn-northd compatibility and ignored")
	return f
}

// prepare takes out the Open vSwitch log settings and gives the optional
// values of --pidfile and --log-file, which package flag cannot express.
func (f *northdFlags) prepare(args []string) []string {
	f.args = args
	args, f.o.vlog = splitVlogArgs(args)
	return defaultOptionalValues(args, map[string]string{
		"pidfile":  filepath.Join(f.rundir, northdProgramName+".pid"),
		"log-file": filepath.Join(f.logdir, northdProgramName+".log"),
	})
}

// finish checks the parsed options and completes them.
func (f *northdFlags) finish() (northdOptions, error) {
	o := f.o
	var err error
	if o.nb, err = splitRemotes("--ovnnb-db", *f.nb); err != nil {
		return northdOptions{}, err
	}
	if o.sb, err = splitRemotes("--ovnsb-db", *f.sb); err != nil {
		return northdOptions{}, err
	}
	if o.pidfile != "" {
		o.pidfile = inDir(f.rundir, o.pidfile)
	}
	if o.unixctl != "" {
		o.unixctl = inDir(f.rundir, o.unixctl)
	}
	o.rundir = f.rundir
	return o, nil
}

// parseNorthdFlags parses "govn northd" options as its command does.
func parseNorthdFlags(args []string, getenv func(string) string) (northdOptions, error) {
	fs := flag.NewFlagSet("govn northd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := defineNorthdFlags(fs, getenv)
	if err := fs.Parse(f.prepare(args)); err != nil {
		return northdOptions{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return northdOptions{}, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return f.finish()
}

// splitRemotes splits a comma-separated list of database remotes.
func splitRemotes(flagName, list string) ([]string, error) {
	var out []string
	for _, r := range strings.Split(list, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s: no database remote", errUsage, flagName)
	}
	return out, nil
}

// probeInterval is how long a connection may stay silent before northd
// probes it: ovn-northd's default of 5 s over the network, none over unix
// sockets, whose peer cannot vanish without the kernel saying so.
func (o northdOptions) probeInterval() time.Duration {
	for _, r := range append(append([]string(nil), o.nb...), o.sb...) {
		if !strings.HasPrefix(r, "unix:") {
			return 5 * time.Second
		}
	}
	return 0
}

// controlSocket is the control socket's path for process pid.
func (o northdOptions) controlSocket(pid int) string {
	if o.unixctl != "" {
		return o.unixctl
	}
	return filepath.Join(o.rundir, fmt.Sprintf("%s.%d.ctl", northdProgramName, pid))
}

// tls returns the TLS configuration for ssl: remotes, or nil when none is
// used.
func (o northdOptions) tls() (*tls.Config, error) {
	ssl := false
	for _, r := range append(append([]string(nil), o.nb...), o.sb...) {
		ssl = ssl || strings.HasPrefix(r, "ssl:")
	}
	if !ssl {
		return nil, nil
	}
	if o.privateKey == "" || o.cert == "" || o.caCrt == "" {
		return nil, fmt.Errorf("%w: ssl: remotes need --private-key, --certificate and --ca-cert", errUsage)
	}
	return client.LoadTLS(o.privateKey, o.cert, o.caCrt)
}

// startNorthd runs northd with opts, or with --detach starts a child that
// does, run with args.
func startNorthd(ctx context.Context, opts northdOptions, args []string) error {
	return runDaemon(ctx, opts.detach, northdProgramName, "northd", args,
		func(ctx context.Context, ready func()) error { return serveNorthd(ctx, opts, ready) })
}

// serveNorthd runs northd until ctx ends or ovn-appctl exit; it calls
// ready once the control socket answers.
func serveNorthd(ctx context.Context, opts northdOptions, ready func()) error {
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
	// In Open vSwitch's log format, as ovn-northd.log.
	logger := slog.New(vlog.New(logOut, "northd", level))
	if len(opts.vlog) > 0 {
		logger.Info("ignoring Open vSwitch log settings", "args", opts.vlog)
	}
	tlsConf, err := opts.tls()
	if err != nil {
		return err
	}
	if opts.pidfile != "" {
		pf, err := daemon.CreatePidfile(opts.pidfile, opts.overwrite)
		if err != nil {
			return err
		}
		defer pf.Remove()
	}
	stopProfile, err := startCPUProfile(opts.cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var events *metrics.Northd
	var onWrite func(northdaemon.LastWrite)
	if opts.metrics != "" {
		// Registered with the registry below, once the daemon exists.
		onWrite = func(w northdaemon.LastWrite) { events.Wrote(w.Latency, w.Ops, w.Recomputed) }
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(northdGCPercent)
	}
	d, err := northdaemon.New(northdaemon.Config{NB: opts.nb, SB: opts.sb, TLS: tlsConf, Logger: logger,
		ProbeInterval: opts.probeInterval(), OnWrite: onWrite})
	if err != nil {
		return err
	}
	d.SetPaused(opts.paused)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := startPeakHeapProfile(ctx, opts.memprofile, logger); err != nil {
		return err
	}
	if err := startMetrics(ctx, opts.metrics, logger, func(reg *prometheus.Registry) {
		events = metrics.NewNorthd(reg)
		reg.MustRegister(metrics.Engine("northd", d.Engine().Stats))
	}); err != nil {
		return err
	}
	path := opts.controlSocket(os.Getpid())
	l, err := unixctlpkg.Listen(path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	cmds := map[string]unixctlpkg.Command{
		"exit":    func([]string) (string, error) { cancel(); return "", nil },
		"version": func([]string) (string, error) { return "govn northd (ovn-northd of OVN) 23.03.1\n", nil },
	}
	for name, f := range d.Commands() {
		cmds[name] = f
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := unixctlpkg.Serve(ctx, l, cmds); err != nil {
			logger.Error("control socket stopped", "err", err)
		}
	}()
	defer func() { cancel(); <-served; os.Remove(path) }()
	logger.Info("govn northd starting", "nb", opts.nb, "sb", opts.sb, "unixctl", path)
	ready()
	return d.Run(ctx)
}
