// Command govn is Open Virtual Network and its datapath in one binary.
//
// Each layer is a subcommand: "govn db" serves OVSDB databases, "govn lflow"
// checks logical flows, "govn bench" compares govn with the real OVN/OVS on
// this machine. Run "govn help" for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// command is one subcommand of govn.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands lists govn's subcommands in the order "govn help" shows them.
func commands() []command {
	return []command{
		{"db", "serve OVSDB databases (like ovsdb-server), or create one: govn db create FILE SCHEMA", runDB},
		{"lflow", "parse and check logical flows: govn lflow check [--normalize] < lflow-list", runLflow},
		{"switch", "run the userspace datapath on ports, with an ovs-appctl control socket: govn switch --port DEV... [--flows=FILE]", runSwitch},
		{"appctl", "run a command on a govn (or OVS) control socket, like ovs-appctl: govn appctl [-t PATH] COMMAND [ARGS]", runAppctl},
		{"bench", "side-by-side benchmarks against the real OVN/OVS: govn bench ovsdb|datapath|conntrack [--json]", runBench},
	}
}

// errUsage marks an error caused by bad command-line arguments; main exits
// with status 2 for it, as flag does.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, commandLine(os.Args), os.Stderr))
}

// dbProgramName is the name under which govn is govn db: a link named
// ovsdb-server to govn stands in for ovsdb-server, and scripts that look
// for a process of that name (ovn-ctl) find it.
const dbProgramName = "ovsdb-server"

// commandLine returns govn's arguments for the process arguments argv.
func commandLine(argv []string) []string {
	if len(argv) > 0 && filepath.Base(argv[0]) == dbProgramName {
		return append([]string{"db"}, argv[1:]...)
	}
	return argv[1:]
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "govn %s: %v\n", c.name, err)
			return 2
		case errors.Is(err, errCommandFailed):
			return 2
		case errors.Is(err, errFailed):
			// The command already reported what failed.
			return 1
		default:
			fmt.Fprintf(stderr, "govn %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "govn: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// errHelp is returned by a command that printed its help because it was
// asked to (-h, --help); main exits with status 0.
var errHelp = errors.New("help printed")

// parseFlags parses a command's flags. Asked for help, it prints synopsis
// and the flags to standard output and returns errHelp; any other error is
// a usage error that shows the synopsis.
func parseFlags(fs *flag.FlagSet, args []string, synopsis string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(fs, synopsis)
		return errHelp
	case err != nil:
		return fmt.Errorf("%w: %v\nusage: %s", errUsage, err, synopsis)
	}
	return nil
}

// printHelp prints synopsis and, if fs has any, its flags to standard output.
func printHelp(fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(os.Stdout, "usage: %s\n", synopsis)
	if fs != nil {
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// errFailed is returned by a command that has already printed its failure
// and only wants a non-zero exit status.
var errFailed = errors.New("failed")

// errCommandFailed is returned by govn appctl when the daemon reported the
// command's failure (already printed); it exits with status 2, as
// ovs-appctl does, so scripts can tell it from failing to reach the daemon.
var errCommandFailed = errors.New("command failed")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: govn COMMAND [ARGS]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}
