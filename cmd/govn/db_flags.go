package main

import (
	"flag"
	"fmt"
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
}

const dbSynopsis = "govn db [--remote=REMOTE]... [--private-key=FILE --certificate=FILE --ca-cert=FILE] [--unixctl=PATH|none] [--pidfile[=PATH]] [--overwrite-pidfile] [--log-file[=PATH]] [--detach] [--user=USER[:GROUP]] [--create=SCHEMA] FILE...\n       govn db create FILE SCHEMA\n       " + dbToolUsage + "\n  REMOTE: punix:PATH, ptcp:PORT[:IP], pssl:PORT[:IP] (listen); unix:PATH, tcp:IP:PORT, ssl:IP:PORT (connect out);\n          db:DB,TABLE,COLUMN (the targets in that column, e.g. db:OVN_Northbound,NB_Global,connections, followed as it changes)\n  FILE options: a file name or db:DB,TABLE,COLUMN (e.g. db:OVN_Northbound,SSL,private_key)\n  Relative --pidfile and --unixctl paths are in $OVS_RUNDIR (default /var/run/openvswitch), as for ovsdb-server;\n  without --unixctl the control socket is $OVS_RUNDIR/ovsdb-server.PID.ctl, which ovs-appctl -t ovsdb-server finds through the pidfile\n  (without --pidfile, govn db goes on without it if it cannot be made)."

// parseDBFlags parses "govn db" options as ovsdb-server takes them, so that
// ovn-ctl can start govn in its place. getenv reads OVS_RUNDIR and
// OVS_LOGDIR, which give the defaults of --pidfile and --log-file without a
// value and the directory of relative --pidfile and --unixctl names.
func parseDBFlags(args []string, getenv func(string) string) (dbOptions, error) {
	var o dbOptions
	rundir := envOr(getenv, "OVS_RUNDIR", "/var/run/openvswitch")
	logdir := envOr(getenv, "OVS_LOGDIR", "/var/log/openvswitch")
	fs := flag.NewFlagSet("govn db", flag.ContinueOnError)
	fs.Var(&o.remotes, "remote", "serve `REMOTE` (see above); repeatable")
	fs.StringVar(&o.tls.PrivateKey, "private-key", "", "SSL private key `FILE` or db:DB,TABLE,COLUMN")
	fs.StringVar(&o.tls.Certificate, "certificate", "", "SSL certificate `FILE` or db:DB,TABLE,COLUMN")
	fs.StringVar(&o.tls.CACert, "ca-cert", "", "SSL CA certificate `FILE` or db:DB,TABLE,COLUMN; peers must present a certificate it signed")
	fs.StringVar(&o.tls.Protocols, "ssl-protocols", "", "allowed SSL `PROTOCOLS` (TLSv1,TLSv1.1,TLSv1.2,TLSv1.3; default TLSv1.2 and later) or db:DB,TABLE,COLUMN")
	fs.StringVar(&o.tls.Ciphers, "ssl-ciphers", "", "OpenSSL cipher `LIST` (e.g. HIGH:!aNULL:!kRSA, ECDHE-RSA-AES256-GCM-SHA384) or db:DB,TABLE,COLUMN choosing the TLS 1.2 and earlier suites, among those Go implements (default: Go's);\nTLS 1.3 suites cannot be chosen in Go and are not affected")
	fs.StringVar(&o.unixctl, "unixctl", "", "answer ovs-appctl commands on the unix socket `PATH` (default $OVS_RUNDIR/ovsdb-server.PID.ctl; none: no control socket)")
	fs.StringVar(&o.pidfile, "pidfile", "", "write the process id to `PATH` and hold it locked; refuse to start while another process holds it (without a value: $OVS_RUNDIR/ovsdb-server.pid)")
	fs.BoolVar(&o.overwrite, "overwrite-pidfile", false, "with --pidfile, replace the pidfile even if another process holds it")
	fs.StringVar(&o.create, "create", "", "create each missing FILE with `SCHEMA` (nb, sb, vswitch or a path)")
	fs.BoolVar(&o.verbose, "verbose", false, "log debug messages")
	fs.StringVar(&o.logFile, "log-file", "", "append logs to `PATH` instead of standard error (without a value: $OVS_LOGDIR/ovsdb-server.log)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile to `FILE` until exit")
	fs.BoolVar(&o.detach, "detach", false, "run in the background; return once the databases are served")
	fs.BoolVar(&o.monitor, "monitor", false, "accepted for ovsdb-server compatibility and ignored: a crashed govn db is not restarted")
	fs.StringVar(&o.user, "user", "", "run as `USER[:GROUP]` (after starting as root)")
	fs.Bool("no-chdir", true, "accepted for ovsdb-server compatibility (govn db never changes directory)")
	fs.Bool("disable-file-column-diff", false, "accepted for ovsdb-server compatibility: govn db always writes whole new column values, never column diffs")
	// Replication is not implemented; these are refused below, by name.
	syncFrom := fs.String("sync-from", "", "not supported (active-backup replication)")
	syncExclude := fs.String("sync-exclude-tables", "", "not supported (active-backup replication)")
	active := fs.Bool("active", false, "not supported (active-backup replication)")
	backup := fs.Bool("backup", false, "not supported (active-backup replication)")

	args, o.vlog = splitVlogArgs(args)
	args = defaultOptionalValues(args, map[string]string{
		"pidfile":  filepath.Join(rundir, "ovsdb-server.pid"),
		"log-file": filepath.Join(logdir, "ovsdb-server.log"),
	})
	if err := parseFlags(fs, args, dbSynopsis); err != nil {
		return dbOptions{}, err
	}
	for name, set := range map[string]bool{
		"sync-from": *syncFrom != "", "sync-exclude-tables": *syncExclude != "",
		"active": *active, "backup": *backup,
	} {
		if set {
			return dbOptions{}, fmt.Errorf("--%s: active-backup replication is not implemented by govn db", name)
		}
	}
	if fs.NArg() == 0 {
		return dbOptions{}, fmt.Errorf("%w: no database FILE\nusage: %s", errUsage, dbSynopsis)
	}
	if o.pidfile != "" {
		o.pidfile = inDir(rundir, o.pidfile)
	}
	if o.unixctl != "" && o.unixctl != "none" {
		o.unixctl = inDir(rundir, o.unixctl)
	}
	o.rundir = rundir
	o.files = fs.Args()
	return o, nil
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
