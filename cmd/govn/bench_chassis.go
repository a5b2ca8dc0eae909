package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/govn/govn/bench/chassisbench"
)

// benchChassisCommand is "govn bench chassis --port-up [--ports N]
// [--json] [--no-ovn]": port-up latency of govn chassis and, side by
// side, of the real ovn-controller with ovs-vswitchd, each on a cluster
// of network namespaces (see package chassisbench). The govn side runs
// this binary as govn chassis.
func benchChassisCommand() *command {
	return &command{
		name:    "chassis",
		summary: "port-up latency of govn chassis and of the real ovn-controller + ovs-vswitchd, in namespaces (root)",
		usage:   "[--port-up] [--ports=N (1..1000)] [--json] [--no-ovn] [--timeout=DURATION] [-v]",
		setup: func(fs *flag.FlagSet) leaf {
			// Port-up latency is the only measurement so far, so the
			// flag that names it is also the default.
			_ = fs.Bool("port-up", true, "measure port-up latency (the default and, so far, only measurement)")
			ports := fs.Int("ports", 100, "ports to bind one after another on each side")
			asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
			noOVN := fs.Bool("no-ovn", false, "skip the real ovn-controller and ovs-vswitchd")
			timeout := fs.Duration("timeout", 5*time.Second, "give up on a port whose first ping has no answer after this long")
			verbose := fs.Bool("v", false, "log every port to stderr")
			return leaf{run: func(ctx context.Context, s stdio, _ []string) error {
				if *ports < 1 || *ports > 1000 || *timeout <= 0 {
					return fmt.Errorf("%w: --ports must be in 1..1000 and --timeout positive", errUsage)
				}
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("finding the govn binary: %w", err)
				}
				level := slog.LevelInfo
				if *verbose {
					level = slog.LevelDebug
				}
				r, err := chassisbench.Run(ctx, chassisbench.Options{
					Govn:    []string{self, "chassis"},
					Ports:   *ports,
					OVN:     !*noOVN,
					Timeout: *timeout,
					Log:     slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level})),
				})
				if err != nil {
					return err
				}
				return writeReport(s.out, *asJSON, r, func(w io.Writer) error { r.WriteTable(w); return nil })
			}}
		},
	}
}
