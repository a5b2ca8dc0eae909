package main

import (
	"context"
	"fmt"
)

// runBench dispatches "govn bench WHAT": each benchmark runs govn and the
// real OVN/OVS side by side on this machine and reports ratios.
func runBench(ctx context.Context, args []string) error {
	benches := map[string]func(context.Context, []string) error{
		"ovsdb":     runBenchOVSDB,
		"datapath":  runBenchDatapath,
		"conntrack": runBenchConntrack,
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: govn bench ovsdb|datapath|conntrack [--json]", errUsage)
	}
	b, ok := benches[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown benchmark %q (want ovsdb, datapath or conntrack)", errUsage, args[0])
	}
	return b(ctx, args[1:])
}
