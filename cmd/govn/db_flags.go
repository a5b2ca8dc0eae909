package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/govn/govn/ovsdb/server"
)

// dbOptions is "govn db"'s command line, parsed.
type dbOptions struct {
	remotes    multiFlag
	tls        server.TLSOptions
	unixctl    string // "" for the default socket, "none" for none
	pidfile    string
	overwrite  bool // --overwrite-pidfile
	rundir     string
	logFile    string
	create     string
	verbose    bool
	cpuprofile string
	detach     bool
	monitor    bool
	user       string
	vlog       []string // Open vSwitch log settings, accepted and ignored
	files      []string
	metrics    string // --metrics address; "" for none
}

// dbDetails ends govn db's help.
const dbDetails = `REMOTE: punix:PATH, ptcp:PORT[:IP], pssl:PORT[:IP] (listen); unix:PATH, tcp:IP:PORT,
  ssl:IP:PORT (connect out); db:DB,TABLE,COLUMN (the targets in that column, e.g.
  db:OVN_Northbound,NB_Global,connections, followed as it changes).
The SSL flags take a FILE or db:DB,TABLE,COLUMN (e.g. db:OVN_Northbound,SSL,private_key);
they also authenticate the peers of a clustered FILE whose addresses are ssl:IP:PORT.
Relative --pidfile and --unixctl paths are in $OVS_RUNDIR (default /var/run/openvswitch),
as for ovsdb-server; without --unixctl the control socket is $OVS_RUNDIR/ovsdb-server.PID.ctl,
which ovs-appctl -t ovsdb-server finds through the pidfile (without --pidfile, govn db goes
on without it if it cannot be made). Open vSwitch log options (-vconsole:off, --verbose=...)
are accepted and ignored. docs/db.md has the details.`

// dbFlags is govn db's command line as package flag sees it.
type dbFlags struct {
	o           dbOptions
	rundir      string
	logdir      string
	syncFrom    *string
	syncExclude *string
	active      *bool
	backup      *bool
	// args is the command line before prepare rewrote it, for the child
	// of --detach.
	args []string
}

// defineDBFlags defines "govn db"'s options on fs, as ovsdb-server takes
// them, so that ovn-ctl can start govn in its place. getenv reads
// OVS_RUNDIR and OVS_LOGDIR, which give the defaults of --pidfile and
// --log-file without a value and the directory of relative --pidfile and
// --unixctl names.
func defineDBFlags(fs *flag.FlagSet, getenv func(string) string) *dbFlags {
	d := &dbFlags{
		rundir: envOr(getenv, "OVS_RUNDIR", "/var/run/openvswitch"),
		logdir: envOr(getenv, "OVS_LOGDIR", "/var/log/openvswitch"),
	}
	o := &d.o
	fs.Var(&o.remotes, "remote", "serve `REMOTE` (see below); repeatable")
	fs.StringVar(&o.tls.PrivateKey, "private-key", "", "SSL private key `FILE` or db:DB,TABLE,COLUMN")
	fs.StringVar(&o.tls.Certificate, "certificate", "", "SSL certificate `FILE` or db:DB,TABLE,COLUMN")
	fs.StringVar(&o.tls.CACert, "ca-cert", "", "SSL CA certificate `FILE` or db:DB,TABLE,COLUMN; peers must present a certificate it signed")
	fs.StringVar(&o.tls.Protocols, "ssl-protocols", "", "allowed SSL `PROTOCOLS` (TLSv1,TLSv1.1,TLSv1.2,TLSv1.3; default TLSv1.2 and later) or db:DB,TABLE,COLUMN")
	fs.StringVar(&o.tls.Ciphers, "ssl-ciphers", "", "OpenSSL cipher `LIST` (e.g. HIGH:!aNULL:!kRSA) or db:DB,TABLE,COLUMN choosing the TLS 1.2 and earlier suites\namong those Go implements (default: Go's); see docs/db.md")
	fs.StringVar(&o.unixctl, "unixctl", "", "answer ovs-appctl commands on the unix socket `PATH` (default $OVS_RUNDIR/ovsdb-server.PID.ctl; none: no control socket)")
	fs.StringVar(&o.pidfile, "pidfile", "", "write the process id to `PATH` and hold it locked; refuse to start while another process holds it\n(without a value: $OVS_RUNDIR/ovsdb-server.pid)")
	fs.BoolVar(&o.overwrite, "overwrite-pidfile", false, "with --pidfile, replace the pidfile even if another process holds it")
	fs.StringVar(&o.create, "create", "", "create each missing FILE with `SCHEMA` ("+schemaNames+")")
	fs.BoolVar(&o.verbose, "verbose", false, "log debug messages")
	fs.StringVar(&o.logFile, "log-file", "", "append logs to `PATH` instead of standard error (without a value: $OVS_LOGDIR/ovsdb-server.log)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile to `FILE` until exit")
	fs.StringVar(&o.metrics, "metrics", "", metricsUsage)
	fs.BoolVar(&o.detach, "detach", false, "run in the background; return once the databases are served")
	fs.BoolVar(&o.monitor, "monitor", false, "accepted for ovsdb-server compatibility and ignored: a crashed govn db is not restarted")
	fs.StringVar(&o.user, "user", "", "run as `USER[:GROUP]` (after starting as root)")
	fs.Bool("no-chdir", true, "accepted for ovsdb-server compatibility (govn db never changes directory)")
	fs.Bool("disable-file-column-diff", false, "accepted for ovsdb-server compatibility: govn db always writes whole new column values, never column diffs")
	// Replication is not implemented; these are refused by finish, by name.
	d.syncFrom = fs.String("sync-from", "", "not supported (active-backup replication)")
	d.syncExclude = fs.String("sync-exclude-tables", "", "not supported (active-backup replication)")
	d.active = fs.Bool("active", false, "not supported (active-backup replication)")
	d.backup = fs.Bool("backup", false, "not supported (active-backup replication)")
	return d
}

// prepare takes out the Open vSwitch log settings and gives the optional
// values of --pidfile and --log-file, which package flag cannot express.
func (d *dbFlags) prepare(args []string) []string {
	d.args = args
	args, d.o.vlog = splitVlogArgs(args)
	return defaultOptionalValues(args, map[string]string{
		"pidfile":  filepath.Join(d.rundir, "ovsdb-server.pid"),
		"log-file": filepath.Join(d.logdir, "ovsdb-server.log"),
	})
}

// finish checks the parsed options and completes them with the database
// files.
func (d *dbFlags) finish(files []string) (dbOptions, error) {
	for name, set := range map[string]bool{
		"sync-from": *d.syncFrom != "", "sync-exclude-tables": *d.syncExclude != "",
		"active": *d.active, "backup": *d.backup,
	} {
		if set {
			return dbOptions{}, fmt.Errorf("--%s: active-backup replication is not implemented by govn db", name)
		}
	}
	if len(files) == 0 {
		return dbOptions{}, fmt.Errorf("%w: no database FILE", errUsage)
	}
	o := d.o
	if o.pidfile != "" {
		o.pidfile = inDir(d.rundir, o.pidfile)
	}
	if o.unixctl != "" && o.unixctl != "none" {
		o.unixctl = inDir(d.rundir, o.unixctl)
	}
	o.rundir = d.rundir
	o.files = files
	return o, nil
}

// parseDBFlags parses "govn db" options as govn db's command does.
func parseDBFlags(args []string, getenv func(string) string) (dbOptions, error) {
	fs := flag.NewFlagSet("govn db", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	d := defineDBFlags(fs, getenv)
	if err := fs.Parse(d.prepare(args)); err != nil {
		return dbOptions{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	return d.finish(fs.Args())
}

// controlSocket is the control socket's path for the process pid, or ""
// for none: --unixctl's, or ovsdb-server's default in the run directory
// (named for ovsdb-server, whatever govn's name, so that "ovs-appctl -t
// ovsdb-server" finds it from $OVS_RUNDIR/ovsdb-server.pid).
func (o dbOptions) controlSocket(pid int) string {
	switch o.unixctl {
	case "none":
		return ""
	case "":
		return filepath.Join(o.rundir, fmt.Sprintf("%s.%d.ctl", dbProgramName, pid))
	}
	return o.unixctl
}

// defaultOptionalValues gives a value to the flags ovsdb-server takes with
// an optional value ("--pidfile" alone, but never "--pidfile PATH", as
// getopt's optional arguments), which package flag cannot express.
func defaultOptionalValues(args []string, defaults map[string]string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if def, ok := defaults[name]; ok && name != a {
			a = "--" + name + "=" + def
		}
		out = append(out, a)
	}
	return out
}

// inDir makes a relative path relative to dir, as ovsdb-server does with
// pidfile and control socket names.
func inDir(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
