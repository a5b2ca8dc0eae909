package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/govn/govn/internal/lab"
	"github.com/govn/govn/sandbox"
)

// sandboxDetails ends govn sandbox's help.
const sandboxDetails = `As root: starts govn db (Northbound and Southbound) and govn northd in a namespace, three
hypervisor namespaces running govn chassis on an underlay bridge, and a demo network: VMs
as namespaces on two logical switches joined by a router, a load balancer whose three
backends serve HTTP, an ACL, a VM that gets its address by DHCP. It checks that packets go where they should, prints what it
built and the real ovn-nbctl, ovn-sbctl, ovs-vsctl and ovs-appctl command lines that reach
it, and removes everything it made when it ends, is interrupted or fails. One sandbox at a
time: it refuses while another one's namespaces (govnsb-*) or directory are there.`

// sandboxCommand is "govn sandbox".
func sandboxCommand() *command {
	return &command{
		name:    "sandbox",
		summary: "a virtual network of govn daemons in namespaces, with a demo and its checks (root)",
		usage:   "[--check] [--keep] [--clean] [--dir=DIR]",
		details: sandboxDetails,
		setup: func(fs *flag.FlagSet) leaf {
			check := fs.Bool("check", false, "run the checks and exit non-zero if any fails; print no description")
			keep := fs.Bool("keep", false, "stay up after the checks until interrupted (Ctrl-C, SIGTERM)")
			clean := fs.Bool("clean", false, "only remove what a sandbox whose process died left behind")
			dir := fs.String("dir", sandbox.DefaultDir(), "keep databases, sockets and logs in `DIR` (must not exist)")
			return leaf{run: func(ctx context.Context, s stdio, _ []string) error {
				if *clean {
					what, err := sandbox.Clean(*dir)
					for _, w := range what {
						fmt.Fprintln(s.out, "removed", w)
					}
					return err
				}
				return runSandbox(ctx, s, sandbox.Options{Dir: *dir}, *check, *keep)
			}}
		},
	}
}

func runSandbox(ctx context.Context, s stdio, opts sandbox.Options, check, keep bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding govn's binary: %w", err)
	}
	begin := time.Now()
	opts.Govn, opts.Progress = self, s.out
	sb, err := sandbox.Start(ctx, opts)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(s.out, "Interrupted; everything the sandbox made is removed.")
		}
		return err
	}
	defer func() {
		fmt.Fprintln(s.out, "Removing the sandbox ...")
		sb.Close()
		fmt.Fprintf(s.out, "Removed (namespaces, processes, %s). Total %.1fs.\n", opts.Dir, time.Since(begin).Seconds())
	}()
	fmt.Fprintf(s.out, "Built in %.1fs.\n", time.Since(begin).Seconds())
	failed := sb.Check(ctx)
	if !check {
		sb.Describe(s.out)
	}
	if failed > 0 {
		fmt.Fprintf(s.out, "%d of %d checks failed.\n", failed, len(sb.Checks()))
	} else {
		fmt.Fprintf(s.out, "All %d checks passed.\n", len(sb.Checks()))
	}
	if keep && ctx.Err() == nil {
		fmt.Fprintln(s.out, "The sandbox stays up until interrupted (Ctrl-C or SIGTERM).")
		<-ctx.Done()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(sb.Checks()))
	}
	return nil
}

// labToolCommand is the hidden "govn lab-tool": the tools that the
// sandbox's VMs run inside their namespaces (lab.RunTool).
func labToolCommand() *command {
	return &command{
		name:    "lab-tool",
		summary: "internal to govn sandbox: a tool run inside a VM",
		usage:   "http-serve ADDR BODY | http-get URL | dhcp4 DEV",
		hidden:  true,
		raw:     true,
		minArgs: 1,
		maxArgs: -1,
		setup: noFlags(func(ctx context.Context, s stdio, args []string) error {
			err := lab.RunTool(ctx, args, s.out)
			if errors.Is(err, lab.ErrToolUsage) {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			return err
		}),
	}
}
