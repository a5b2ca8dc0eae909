package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/govn/govn/unixctl"
)

// runCapture runs the command line args and returns its exit status,
// standard output and standard error.
func runCapture(args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	code = run(context.Background(), args, stdio{strings.NewReader(""), &out, &errb})
	return code, out.String(), errb.String()
}

// commandPaths returns the path of every command of the tree below c,
// c's own included (nil for the root).
func commandPaths(c *command, path []string) [][]string {
	paths := [][]string{path}
	for _, sub := range c.subs {
		paths = append(paths, commandPaths(sub, append(append([]string(nil), path...), sub.name))...)
	}
	return paths
}

// TestHelpAndBadFlags checks every command and subcommand of the tree,
// those added later included: asked for help it prints it to standard
// output and exits 0; given a bad flag it says so on standard error,
// naming the program once, and exits 2.
func TestHelpAndBadFlags(t *testing.T) {
	root := rootCommand()
	paths := commandPaths(root, nil)
	if len(paths) < 15 {
		t.Fatalf("only %d commands in the tree: %q", len(paths), paths)
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"govn"}, path...), " ")
		helps := [][]string{
			append(append([]string(nil), path...), "--help"),
			append(append([]string(nil), path...), "-h"),
			append(append([]string(nil), path...), "-help"),
			append([]string{"help"}, path...),
		}
		if c := root.lookup(path); len(c.subs) > 0 || c.maxArgs == 0 {
			helps = append(helps, append(append([]string(nil), path...), "help"))
		}
		for _, args := range helps {
			code, out, errOut := runCapture(args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: "+name) {
				t.Errorf("govn %s: exit %d, stdout %q, stderr %q; want exit 0 and help starting \"usage: %s\" on stdout only",
					strings.Join(args, " "), code, firstLine(out), errOut, name)
			}
		}
		args := append(append([]string(nil), path...), "--no-such-flag")
		code, out, errOut := runCapture(args...)
		first := firstLine(errOut)
		if code != 2 || out != "" || !strings.HasPrefix(first, name+": ") || strings.Count(first, "govn") != 1 ||
			!strings.Contains(errOut, "usage: "+name) {
			t.Errorf("govn %s: exit %d, stdout %q, stderr %q; want exit 2 and \"%s: ...\" with the usage on stderr only",
				strings.Join(args, " "), code, out, errOut, name)
		}
	}
}

// lookup returns the command at path below c.
func (c *command) lookup(path []string) *command {
	for _, name := range path {
		c = c.sub(name)
	}
	return c
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestExitStatus checks the exit statuses a script relies on: 0 for
// asked-for help, 2 for bad arguments, as flag-based tools do, 1 for a
// failure.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"help"}, 0},
		{[]string{"help", "db", "create"}, 0},
		{[]string{"help", "nosuch"}, 2},
		{[]string{}, 2},
		{[]string{"no-such-command"}, 2},
		{[]string{"db"}, 2},
		{[]string{"db", "create", "x"}, 2},
		{[]string{"db", "db-version"}, 2},
		{[]string{"db", "schema-version", "a", "b"}, 2},
		{[]string{"switch", "--port"}, 2},
		{[]string{"switch", "extra"}, 2},
		{[]string{"appctl"}, 2},
		{[]string{"lflow"}, 2},
		{[]string{"lflow", "nosuch"}, 2},
		{[]string{"lflow", "check", "extra"}, 2},
		{[]string{"lflow", "symbols", "extra"}, 2},
		{[]string{"bench"}, 2},
		{[]string{"bench", "nosuch"}, 2},
		{[]string{"bench", "datapath", "--rounds=9"}, 2},
		{[]string{"bench", "ovsdb", "extra"}, 2},
		{[]string{"bench", "datapath-internal", "--bogus"}, 2},
		{[]string{"version", "extra"}, 2},
		{[]string{"lflow", "symbols"}, 0},
		{[]string{"lflow", "check"}, 1}, // no flows on standard input
		{[]string{"version"}, 0},
	} {
		if got, _, _ := runCapture(tc.args...); got != tc.want {
			t.Errorf("govn %q: exit status %d, want %d", tc.args, got, tc.want)
		}
	}
}

// TestVersion checks govn version and govn --version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCapture(args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "govn ") || !strings.Contains(out, "github.com/govn/govn") ||
			!strings.Contains(out, runtime.Version()) {
			t.Errorf("govn %s: exit %d, stdout %q, stderr %q", args[0], code, out, errOut)
		}
	}
}

// TestErrorMessages checks what a newcomer's first mistakes print: the
// program named once, the valid schema names, a hint to --create.
func TestErrorMessages(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args    []string
		code    int
		want    []string // substrings of stderr
		notWant string   // a substring stderr must not have
	}{
		{[]string{"switch", "--unixctl=", "--flows=" + filepath.Join(dir, "missing.flows")}, 1,
			[]string{"govn switch: reading flows: open "}, "switch: switch"},
		{[]string{"db", "--create=nbx", "--unixctl=none", filepath.Join(dir, "x.db")}, 2,
			[]string{"govn db: --create=nbx: ", "nb, sb, vswitch"}, "db: db"},
		{[]string{"db", "create", filepath.Join(dir, "y.db"), "sbx"}, 1,
			[]string{"govn db create: ", "nb, sb, vswitch"}, ""},
		{[]string{"db", "--unixctl=none", filepath.Join(dir, "missing.db")}, 1,
			[]string{"govn db: database " + filepath.Join(dir, "missing.db") + " does not exist; add --create=SCHEMA"}, ""},
		{[]string{"bench", "nosuch"}, 2, []string{"govn bench: unknown command \"nosuch\"", "ovsdb|datapath|conntrack"}, ""},
	} {
		code, _, errOut := runCapture(tc.args...)
		if code != tc.code {
			t.Errorf("govn %q: exit %d, want %d; stderr %q", tc.args, code, tc.code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("govn %q: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
		if tc.notWant != "" && strings.Contains(errOut, tc.notWant) {
			t.Errorf("govn %q: stderr %q has %q", tc.args, errOut, tc.notWant)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.db")); !os.IsNotExist(err) {
		t.Errorf("--create=nbx made a file: %v", err)
	}
}

// govn appctl exits like ovs-appctl: 2 when the daemon reports the
// command's failure, 1 when the daemon cannot be reached, 0 on success.
func TestAppctlExitStatus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.ctl")
	l, err := unixctl.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		unixctl.Serve(ctx, l, map[string]unixctl.Command{
			"ok":   func([]string) (string, error) { return "fine\n", nil },
			"fail": func([]string) (string, error) { return "", errors.New("no such thing") },
		})
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"appctl", "-t", path, "ok"}, 0},
		{[]string{"appctl", "-t", path, "fail"}, 2},
		{[]string{"appctl", "-t", path, "no-such-command"}, 2},
		{[]string{"appctl", "-t", path + ".missing", "ok"}, 1},
	} {
		if got, _, _ := runCapture(tc.args...); got != tc.want {
			t.Errorf("govn %q: exit status %d, want %d", tc.args, got, tc.want)
		}
	}
}

// Run as ovsdb-server (a link to govn), govn is govn db, and a detached
// child keeps that name.
func TestProgramName(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"govn", "db", "x.db"}, "db x.db"},
		{[]string{"/usr/sbin/ovsdb-server", "--remote=punix:s", "x.db"}, "db --remote=punix:s x.db"},
		{[]string{"ovsdb-server"}, "db"},
		{[]string{"/opt/ovsdb-server-old", "db"}, "db"},
	} {
		if got := strings.Join(commandLine(tc.argv), " "); got != tc.want {
			t.Errorf("commandLine(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
	exe, args, err := programCommand("/usr/sbin/ovsdb-server", dbProgramName, "db", []string{"--detach", "x.db"})
	if err != nil || exe != "/usr/sbin/ovsdb-server" || strings.Join(args, " ") != "--detach x.db" {
		t.Errorf("programCommand as ovsdb-server = %q %q %v", exe, args, err)
	}
	exe, args, err = programCommand("govn", dbProgramName, "db", []string{"x.db"})
	if err != nil || filepath.Base(exe) == "ovsdb-server" || strings.Join(args, " ") != "db x.db" {
		t.Errorf("programCommand as govn = %q %q %v", exe, args, err)
	}
}
