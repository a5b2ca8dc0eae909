package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/unixctl"
)

// appctlCommand is "govn appctl [-t TARGET] [--timeout=D] COMMAND
// [ARGS...]", a client of any govn control socket (govn switch, govn db
// --unixctl) and of OVS daemons' sockets, like ovs-appctl. TARGET is a
// socket path, or a name such as "switch" meaning /run/govn/NAME.ctl.
func appctlCommand() *command {
	return &command{
		name:    "appctl",
		summary: "run a command on a govn (or OVS) control socket, like ovs-appctl",
		usage:   "[-t PATH|NAME] [--timeout=DURATION] COMMAND [ARGS...]\n  (try: govn appctl list-commands)",
		minArgs: 1, maxArgs: -1,
		setup: func(fs *flag.FlagSet) leaf {
			target := fs.String("t", switchd.DefaultUnixctl, "the control socket `PATH`, or a daemon name under /run/govn")
			fs.StringVar(target, "target", switchd.DefaultUnixctl, "same as -t `PATH`")
			timeout := fs.Duration("timeout", 0, "give up after `DURATION` (e.g. 5s); 0 waits as long as it takes")
			return leaf{run: func(ctx context.Context, s stdio, args []string) error {
				return appctl(ctx, s, *target, *timeout, args)
			}}
		},
	}
}

// appctl runs the command args on the control socket target.
func appctl(ctx context.Context, s stdio, target string, timeout time.Duration, args []string) error {
	path := target
	if !strings.Contains(path, "/") {
		path = "/run/govn/" + path + ".ctl"
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	out, err := unixctl.Call(ctx, path, args[0], args[1:]...)
	var ce *unixctl.CommandError
	if errors.As(err, &ce) {
		msg := ce.Message
		if !strings.HasSuffix(msg, "\n") {
			msg += "\n"
		}
		fmt.Fprint(s.err, msg)
		return errCommandFailed
	}
	if err != nil {
		return err
	}
	fmt.Fprint(s.out, out)
	return nil
}
