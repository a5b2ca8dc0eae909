package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
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
