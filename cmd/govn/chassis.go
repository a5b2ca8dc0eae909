package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/controller"
	"github.com/govn/govn/internal/daemon"
	"github.com/govn/govn/internal/metrics"
	unixctlpkg "github.com/govn/govn/unixctl"
)

// chassisProgramName names govn chassis' default pidfile, control socket
// and log file.
const chassisProgramName = "govn-chassis"

// chassisOptions is "govn chassis"'s command line, parsed.
type chassisOptions struct {
	db        string // unix:PATH of an existing database; "" to serve one
	dbFile    string // the database file served
	dbSocket  string // where it is served
	unixctl   string
	pidfile   string
	overwrite bool
	logFile   string
	detach    bool
	verbose   bool
	rundir    string
	// cpuprofile, if set, is where a CPU profile of the whole run goes.
	cpuprofile string
	metrics    string // --metrics address; "" for none
}

// chassisDetails ends govn chassis' help.
const chassisDetails = `Without --db, govn chassis serves its local Open_vSwitch database (vswitch schema) from
$OVS_DBDIR/conf.db, created if missing, on punix:$OVS_RUNDIR/db.sock, so that ovs-vsctl
configures it as it configures ovs-vswitchd and ovn-controller:
  ovs-vsctl set open . external_ids:system-id=hv1 external_ids:ovn-remote=unix:SB \
      external_ids:ovn-encap-type=geneve external_ids:ovn-encap-ip=IP
  ovs-vsctl add-br br-int
  ovs-vsctl add-port br-int veth1 -- set Interface veth1 external_ids:iface-id=LSP
Interfaces are opened with AF_PACKET (type=internal: a TAP device); ports on br-int with an
iface-id are bound to their logical port. Other bridges forward among their own ports.
OVS_RUNDIR defaults to /var/run/openvswitch, OVS_DBDIR to /etc/openvswitch. Relative
--pidfile and --unixctl paths are in $OVS_RUNDIR; without --unixctl the control socket is
$OVS_RUNDIR/govn-chassis.PID.ctl. The control socket answers ovs-appctl/ovn-appctl -t:
dump-flows, ofproto/trace, dpctl/dump-flows, conntrack/dump, ct-zone-list, exit, ...`

// chassisCommand is "govn chassis".
func chassisCommand() *command {
	return &command{
		name:    "chassis",
		summary: "run a hypervisor: ovn-controller's and ovs-vswitchd's jobs on govn's datapath (root)",
		usage:   "[--db=unix:PATH] [--unixctl=PATH] [--pidfile[=PATH]] [--log-file[=PATH]] [--detach] [--metrics=ADDR]",
		details: chassisDetails,
		setup: func(fs *flag.FlagSet) leaf {
			f := defineChassisFlags(fs, os.Getenv)
			return leaf{prepare: f.prepare, run: func(ctx context.Context, _ stdio, _ []string) error {
				return startChassis(ctx, f.finish(), f.args)
			}}
		},
	}
}

// chassisFlags is govn chassis' command line as package flag sees it.
type chassisFlags struct {
	o              chassisOptions
	rundir, logdir string
	dbdir          string
	args           []string // before prepare, for the child of --detach
}

func defineChassisFlags(fs *flag.FlagSet, getenv func(string) string) *chassisFlags {
	f := &chassisFlags{
		rundir: envOr(getenv, "OVS_RUNDIR", "/var/run/openvswitch"),
		logdir: envOr(getenv, "OVS_LOGDIR", "/var/log/openvswitch"),
		dbdir:  envOr(getenv, "OVS_DBDIR", "/etc/openvswitch"),
	}
	o := &f.o
	fs.StringVar(&o.db, "db", "", "use the Open_vSwitch database at `unix:PATH` instead of serving one")
	fs.StringVar(&o.unixctl, "unixctl", "", "answer ovs-appctl commands on the unix socket `PATH`")
	fs.StringVar(&o.pidfile, "pidfile", "", "write the process id to `PATH` and hold it locked (without a value: $OVS_RUNDIR/govn-chassis.pid)")
	fs.BoolVar(&o.overwrite, "overwrite-pidfile", false, "with --pidfile, replace the pidfile even if another process holds it")
	fs.StringVar(&o.logFile, "log-file", "", "append logs to `PATH` instead of standard error (without a value: $OVS_LOGDIR/govn-chassis.log)")
	fs.BoolVar(&o.detach, "detach", false, "run in the background; return once the local database answers")
	fs.BoolVar(&o.verbose, "verbose", false, "log debug messages")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile (go tool pprof) of the whole run to `PATH`")
	fs.StringVar(&o.metrics, "metrics", "", metricsUsage)
	fs.Bool("no-chdir", true, "accepted for compatibility (govn chassis never changes directory)")
	fs.Bool("monitor", false, "accepted for compatibility and ignored")
	return f
}

func (f *chassisFlags) prepare(args []string) []string {
	f.args = args
	args, _ = splitVlogArgs(args)
	return defaultOptionalValues(args, map[string]string{
		"pidfile":  filepath.Join(f.rundir, chassisProgramName+".pid"),
		"log-file": filepath.Join(f.logdir, chassisProgramName+".log"),
	})
}

func (f *chassisFlags) finish() chassisOptions {
	o := f.o
	o.rundir = f.rundir
	if o.pidfile != "" {
		o.pidfile = inDir(f.rundir, o.pidfile)
	}
	if o.unixctl != "" {
		o.unixctl = inDir(f.rundir, o.unixctl)
	}
	o.dbFile = filepath.Join(f.dbdir, "conf.db")
	o.dbSocket = filepath.Join(f.rundir, "db.sock")
	return o
}

func startChassis(ctx context.Context, opts chassisOptions, args []string) error {
	return runDaemon(ctx, opts.detach, chassisProgramName, "chassis", args,
		func(ctx context.Context, ready func()) error { return serveChassis(ctx, opts, ready) })
}

// serveChassis runs the chassis until ctx ends or exit.
func serveChassis(ctx context.Context, opts chassisOptions, ready func()) error {
	logOut, level, closeLog, err := openDaemonLog(opts.logFile, opts.verbose)
	if err != nil {
		return err
	}
	defer closeLog()
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The metrics endpoint is up before anything else starts, so that a
	// busy address stops govn chassis with nothing to undo; the
	// chassis's collectors join the registry once its datapath runs.
	var reg *prometheus.Registry
	if opts.metrics != "" {
		reg = metrics.NewRegistry()
		if _, err := metrics.Serve(ctx, opts.metrics, reg, logger); err != nil {
			return err
		}
	}

	localDB := opts.db
	dbDone := make(chan error, 1)
	if localDB == "" {
		if err := os.MkdirAll(filepath.Dir(opts.dbFile), 0o755); err != nil {
			return fmt.Errorf("database directory: %w", err)
		}
		dbOpts := dbOptions{files: []string{opts.dbFile}, create: "vswitch", remotes: multiFlag{"punix:" + opts.dbSocket},
			unixctl: "none", rundir: opts.rundir, logFile: opts.logFile, verbose: opts.verbose}
		served := make(chan struct{})
		go func() { dbDone <- serveDB(ctx, dbOpts, func() { close(served) }) }()
		select {
		case <-served:
		case err := <-dbDone:
			return fmt.Errorf("serving the local database: %w", err)
		}
		localDB = "unix:" + opts.dbSocket
	} else if !strings.HasPrefix(localDB, "unix:") {
		return fmt.Errorf("%w: --db=%s: want unix:PATH", errUsage, localDB)
	}

	ctlPath := opts.unixctl
	if ctlPath == "" {
		ctlPath = filepath.Join(opts.rundir, fmt.Sprintf("%s.%d.ctl", chassisProgramName, os.Getpid()))
	}
	l, err := unixctlpkg.Listen(ctlPath)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	defer os.Remove(ctlPath)
	ctlDone := make(chan struct{})
	serving := false
	commands := func(cmds map[string]unixctlpkg.Command) {
		serving = true
		go func() {
			defer close(ctlDone)
			if err := unixctlpkg.Serve(ctx, l, cmds); err != nil {
				logger.Error("control socket stopped", "err", err)
			}
		}()
		ready()
	}
	logger.Info("govn chassis starting", "db", localDB, "unixctl", ctlPath)
	cfg := controller.Config{LocalDB: localDB, Logger: logger, Commands: commands, Stop: cancel}
	if reg != nil {
		events := metrics.NewChassis(reg)
		cfg.Applied = events.Applied
		cfg.Observe = func(src controller.Sources) {
			reg.MustRegister(metrics.Engine("chassis", src.Engine), metrics.Datapath(src.Switch), metrics.Pinctrl(src.Pinctrl))
		}
	}
	err = controller.Run(ctx, cfg)
	cancel()
	if serving {
		<-ctlDone
	} else {
		l.Close()
	}
	if opts.db == "" {
		if dbErr := <-dbDone; dbErr != nil && !errors.Is(dbErr, context.Canceled) {
			err = errors.Join(err, dbErr)
		}
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
