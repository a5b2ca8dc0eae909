package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govn/govn/unixctl"
)

// TestExitStatus checks the exit statuses a script relies on: 0 for
// asked-for help, 2 for bad arguments, as flag-based tools do.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"help"}, 0},
		{[]string{}, 2},
		{[]string{"no-such-command"}, 2},
		{[]string{"db", "--help"}, 0},
		{[]string{"db", "-h"}, 0},
		{[]string{"db", "--bogus"}, 2},
		{[]string{"db"}, 2},
		{[]string{"db", "create", "x"}, 2},
		{[]string{"switch", "--help"}, 0},
		{[]string{"switch", "--port"}, 2},
		{[]string{"appctl", "--help"}, 0},
		{[]string{"appctl"}, 2},
		{[]string{"lflow", "check", "--help"}, 0},
		{[]string{"lflow", "check", "extra"}, 2},
		{[]string{"bench", "datapath", "--help"}, 0},
		{[]string{"bench", "datapath", "--rounds=9"}, 2},
		{[]string{"bench", "conntrack", "--nope"}, 2},
		{[]string{"bench", "ovsdb", "--help"}, 0},
		{[]string{"bench", "ovsdb", "extra"}, 2},
	} {
		if got := run(context.Background(), tc.args, io.Discard); got != tc.want {
			t.Errorf("govn %q: exit status %d, want %d", tc.args, got, tc.want)
		}
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
		if got := run(context.Background(), tc.args, io.Discard); got != tc.want {
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
	exe, args, err := detachCommand("/usr/sbin/ovsdb-server", []string{"--detach", "x.db"})
	if err != nil || exe != "/usr/sbin/ovsdb-server" || strings.Join(args, " ") != "--detach x.db" {
		t.Errorf("detachCommand as ovsdb-server = %q %q %v", exe, args, err)
	}
	exe, args, err = detachCommand("govn", []string{"x.db"})
	if err != nil || filepath.Base(exe) == "ovsdb-server" || strings.Join(args, " ") != "db x.db" {
		t.Errorf("detachCommand as govn = %q %q %v", exe, args, err)
	}
}
