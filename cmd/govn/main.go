// Command govn is Open Virtual Network and its datapath in one binary.
//
// Each layer is a subcommand: "govn db" serves OVSDB databases, "govn lflow"
// checks logical flows, "govn switch" runs the datapath, "govn bench"
// compares govn with the real OVN/OVS on this machine. Run "govn help" for
// the list.
//
// # Command-line conventions
//
// Every command is a node of the tree that rootCommand returns, and the
// tree, not each command, implements these conventions, so a command added
// to it (northd, chassis, trace, sandbox) follows them without code of its
// own:
//
//   - "-h", "-help" and "--help" as a command's first argument, "help" as
//     the first argument of a group or of a command that takes no
//     positional arguments, and "govn help COMMAND [SUBCOMMAND]" print that
//     command's help (usage, summary, flags, subcommands) to standard
//     output and exit 0.
//   - A bad flag, a missing or unknown subcommand, or a wrong number of
//     arguments prints "govn CMD: what is wrong", the usage and where to get
//     help to standard error and exits 2. A command reports such errors of
//     its own by wrapping errUsage.
//   - Any other failure prints "govn CMD: what failed" to standard error
//     and exits 1. The program is named once, there: errors returned by
//     commands say what failed, never who they are.
//   - "govn version" and "govn --version" print govn's module version and
//     the Go version it was built with.
//
// A command with flags gives a setup function that defines them on the
// flag.FlagSet it is handed and returns the function that runs the command
// with the positional arguments; minArgs and maxArgs bound those.
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
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// stdio is where a command reads and writes.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// runFunc runs a leaf command with its positional arguments.
type runFunc func(ctx context.Context, s stdio, args []string) error

// leaf is what a command's setup returns.
type leaf struct {
	run runFunc
	// prepare, if set, rewrites the arguments before the flags parse
	// them (govn db: ovsdb-server's options that package flag cannot
	// express).
	prepare func(args []string) []string
}

// command is one node of govn's command tree: a group of subcommands, a
// leaf that runs, or both (govn db serves, and has subcommands).
type command struct {
	name    string
	summary string // one line, in the parent's list
	// usage is the synopsis after the command's path ("[--json] FILE...");
	// further lines are further forms or notes.
	usage string
	// details, if set, is printed after the flags in the help.
	details string
	subs    []*command
	// setup, for a leaf, defines its flags on fs and returns how to run it.
	setup func(fs *flag.FlagSet) leaf
	// raw leaves get their arguments unparsed (hidden internal commands).
	raw bool
	// minArgs and maxArgs bound the positional arguments; maxArgs < 0
	// means no limit.
	minArgs, maxArgs int
	hidden           bool // left out of the parent's list
}

// rootCommand returns govn's command tree.
func rootCommand() *command {
	return &command{
		name:    "govn",
		summary: "Open Virtual Network and its datapath in one binary",
		usage:   "COMMAND [ARGS]",
		subs: []*command{
			dbCommand(),
			northdCommand(),
			lflowCommand(),
			traceCommand(),
			switchCommand(),
			chassisCommand(),
			sandboxCommand(),
			labToolCommand(),
			appctlCommand(),
			benchCommand(),
			versionCommand(),
		},
	}
}

// errUsage marks an error caused by bad command-line arguments; govn
// prints the usage with it and exits with status 2, as package flag does.
var errUsage = errors.New("usage")

// errFailed is returned by a command that has already printed its failure
// and only wants exit status 1.
var errFailed = errors.New("failed")

// errCommandFailed is returned by govn appctl when the daemon reported the
// command's failure (already printed); it exits with status 2, as
// ovs-appctl does, so scripts can tell it from failing to reach the daemon.
var errCommandFailed = errors.New("command failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, commandLine(os.Args), stdio{os.Stdin, os.Stdout, os.Stderr}))
}

// dbProgramName is the name under which govn is govn db: a link named
// ovsdb-server to govn stands in for ovsdb-server, and scripts that look
// for a process of that name (ovn-ctl) find it.
const dbProgramName = "ovsdb-server"

// commandLine returns govn's arguments for the process arguments argv.
func commandLine(argv []string) []string {
	if len(argv) > 0 {
		switch filepath.Base(argv[0]) {
		case dbProgramName:
			return append([]string{"db"}, argv[1:]...)
		case northdProgramName:
			return append([]string{"northd"}, argv[1:]...)
		}
	}
	return argv[1:]
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, s stdio) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...)
	}
	return rootCommand().exec(ctx, s, nil, args)
}

// isHelpFlag reports whether a is a request for help.
func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// exec runs c, reached through parents, with args.
func (c *command) exec(ctx context.Context, s stdio, parents []string, args []string) int {
	path := append(append([]string(nil), parents...), c.name)
	if len(c.subs) > 0 && len(args) > 0 {
		switch {
		case isHelpFlag(args[0]):
			c.printHelp(s.out, path)
			return 0
		case args[0] == "help":
			return c.help(s, path, args[1:])
		}
		if sub := c.sub(args[0]); sub != nil {
			return sub.exec(ctx, s, path, args[1:])
		}
	}
	if c.setup == nil {
		if len(args) == 0 {
			return c.usageError(s, path, "missing command")
		}
		if strings.HasPrefix(args[0], "-") {
			return c.usageError(s, path, fmt.Sprintf("unknown flag %s", args[0]))
		}
		return c.usageError(s, path, fmt.Sprintf("unknown command %q", args[0]))
	}
	if c.maxArgs == 0 && len(args) > 0 && args[0] == "help" {
		// It cannot be an argument: it asks for help.
		c.printHelp(s.out, path)
		return 0
	}
	fs := flag.NewFlagSet(strings.Join(path, " "), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	l := c.setup(fs)
	if c.raw {
		if len(args) > 0 && isHelpFlag(args[0]) {
			c.printHelp(s.out, path)
			return 0
		}
	} else {
		if l.prepare != nil {
			args = l.prepare(args)
		}
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			c.printHelp(s.out, path)
			return 0
		} else if err != nil {
			return c.usageError(s, path, err.Error())
		}
		args = fs.Args()
	}
	if len(args) < c.minArgs {
		return c.usageError(s, path, "missing arguments")
	}
	if c.maxArgs >= 0 && len(args) > c.maxArgs {
		return c.usageError(s, path, fmt.Sprintf("unexpected argument %q", args[c.maxArgs]))
	}
	err := l.run(ctx, s, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return c.usageError(s, path, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
	case errors.Is(err, errCommandFailed):
		return 2
	case errors.Is(err, errFailed):
		return 1
	default:
		fmt.Fprintf(s.err, "%s: %v\n", strings.Join(path, " "), err)
		return 1
	}
}

// sub returns c's subcommand called name, or nil.
func (c *command) sub(name string) *command {
	for _, sub := range c.subs {
		if sub.name == name {
			return sub
		}
	}
	return nil
}

// help implements "CMD help [SUB...]": the help of the subcommand that
// names lead to.
func (c *command) help(s stdio, path, names []string) int {
	target := c
	for _, name := range names {
		sub := target.sub(name)
		if sub == nil {
			return target.usageError(s, path, fmt.Sprintf("no help for unknown command %q", name))
		}
		target, path = sub, append(path, name)
	}
	target.printHelp(s.out, path)
	return 0
}

// usageError reports a usage error of the command at path and returns
// exit status 2.
func (c *command) usageError(s stdio, path []string, msg string) int {
	name := strings.Join(path, " ")
	fmt.Fprintf(s.err, "%s: %s\n", name, msg)
	c.writeUsage(s.err, name)
	fmt.Fprintf(s.err, "Run '%s --help' for more.\n", name)
	return 2
}

// writeUsage writes c's synopsis: its forms, then the notes (the lines of
// usage that start with a space).
func (c *command) writeUsage(w io.Writer, name string) {
	var forms, notes []string
	for _, line := range strings.Split(c.usage, "\n") {
		if strings.HasPrefix(line, " ") {
			notes = append(notes, line)
		} else {
			forms = append(forms, line)
		}
	}
	if c.setup != nil && len(c.subs) > 0 {
		forms = append(forms, "COMMAND [ARGS]")
	}
	prefix := "usage:"
	for _, f := range forms {
		fmt.Fprintf(w, "%s %s %s\n", prefix, name, f)
		prefix = "      "
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// printHelp writes c's help: usage, summary, flags, subcommands, details.
func (c *command) printHelp(w io.Writer, path []string) {
	name := strings.Join(path, " ")
	c.writeUsage(w, name)
	fmt.Fprintf(w, "\n%s.\n", sentence(c.summary))
	if c.setup != nil && !c.raw {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		c.setup(fs)
		printFlags(w, fs)
	}
	var subs []*command
	for _, sub := range c.subs {
		if !sub.hidden {
			subs = append(subs, sub)
		}
	}
	if len(subs) > 0 {
		fmt.Fprintf(w, "\nCommands:\n")
		for _, sub := range subs {
			fmt.Fprintf(w, "  %-18s %s\n", sub.name, sub.summary)
		}
		fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's help.\n", name)
	}
	if c.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.details, "\n"))
	}
}

// sentence makes a summary a sentence: capitalized, without its period
// (the caller adds one).
func sentence(s string) string {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// printFlags lists fs's flags, long names with two dashes.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintf(w, "\nFlags:\n")
			first = false
		}
		arg, usage := flag.UnquoteUsage(f)
		if len(f.Name) == 1 {
			if arg != "" {
				arg = " " + arg
			}
			fmt.Fprintf(w, "  -%s%s\n", f.Name, arg)
		} else {
			if arg != "" {
				arg = "=" + arg
			}
			fmt.Fprintf(w, "  --%s%s\n", f.Name, arg)
		}
		usage = strings.ReplaceAll(usage, "\n", "\n        ")
		switch f.DefValue {
		case "", "0", "false", "0s", "[]":
		default:
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "        %s\n", usage)
	})
}

// noFlags is the setup of a leaf without flags.
func noFlags(run runFunc) func(*flag.FlagSet) leaf {
	return func(*flag.FlagSet) leaf { return leaf{run: run} }
}

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print govn's version and the Go version it was built with (also: govn --version)",
		setup: noFlags(func(_ context.Context, s stdio, _ []string) error {
			_, err := fmt.Fprint(s.out, versionText())
			return err
		}),
	}
}

// versionText is what govn version prints: the module's version (a
// pseudo-version from the VCS when built from a checkout, "(devel)" under
// go run), the commit it was built from, and the Go toolchain.
func versionText() string {
	var b strings.Builder
	version, module := "(unknown)", "github.com/govn/govn"
	var revision, modified string
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, module = bi.Main.Version, bi.Main.Path
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	fmt.Fprintf(&b, "govn %s (module %s)\n", version, module)
	if revision != "" {
		if modified == "true" {
			revision += " with local changes"
		}
		fmt.Fprintf(&b, "commit %s\n", revision)
	}
	fmt.Fprintf(&b, "built with %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}
