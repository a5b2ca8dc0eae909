package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/unixctl"
)

// runAppctl implements "govn appctl [-t TARGET] [--timeout=D] COMMAND [ARGS...]", a
// client of any govn control socket (govn switch, govn db --unixctl) and
// of OVS daemons' sockets, like ovs-appctl. TARGET is a socket path, or a
// name such as "switch" meaning /run/govn/NAME.ctl.
func runAppctl(ctx context.Context, args []string) error {
	return runAppctlIO(ctx, args, os.Stdout, os.Stderr)
}

func runAppctlIO(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "govn appctl [-t PATH|NAME] [--timeout=DURATION] COMMAND [ARGS...]   (try: govn appctl list-commands)"
	fs := flag.NewFlagSet("appctl", flag.ContinueOnError)
	target := fs.String("t", switchd.DefaultUnixctl, "the control socket `PATH`, or a daemon name under /run/govn")
	fs.StringVar(target, "target", switchd.DefaultUnixctl, "same as -t")
	timeout := fs.Duration("timeout", 0, "give up after `DURATION` (e.g. 5s); 0 waits as long as it takes")
	if err := parseFlags(fs, args, synopsis); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: no command\nusage: %s", errUsage, synopsis)
	}
	path := *target
	if !strings.Contains(path, "/") {
		path = "/run/govn/" + path + ".ctl"
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	out, err := unixctl.Call(ctx, path, fs.Arg(0), fs.Args()[1:]...)
	var ce *unixctl.CommandError
	if errors.As(err, &ce) {
		msg := ce.Message
		if !strings.HasSuffix(msg, "\n") {
			msg += "\n"
		}
		fmt.Fprint(stderr, msg)
		return errCommandFailed
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, out)
	return nil
}
