package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/govn/govn/bench/dpbench"
)

// benchCommand is "govn bench WHAT": each benchmark runs govn and the real
// OVN/OVS side by side on this machine and reports ratios.
func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "side-by-side benchmarks against the real OVN/OVS on this machine",
		usage:   "ovsdb|datapath|conntrack|northd|chassis [--json] [FLAGS]",
		subs: []*command{
			benchOVSDBCommand(),
			benchDatapathCommand(),
			benchConntrackCommand(),
			benchNorthdCommand(),
			benchChassisCommand(),
			{
				// govn bench datapath re-executes govn as a traffic
				// tool and as the switch inside its namespaces.
				name:    dpbenchInternal,
				summary: "internal to govn bench datapath",
				usage:   "--internal-traffic TOOL ARGS... | --internal-switch DEVICES...",
				hidden:  true,
				raw:     true,
				maxArgs: -1,
				setup: noFlags(func(ctx context.Context, _ stdio, args []string) error {
					ok, err := dpbench.Internal(ctx, args)
					if !ok {
						return fmt.Errorf("%w: want --internal-traffic or --internal-switch", errUsage)
					}
					return err
				}),
			},
		},
	}
}

// dpbenchInternal is the hidden subcommand of govn bench that dpbench runs.
const dpbenchInternal = "datapath-internal"

// writeReport prints a bench's report: with --json as one indented JSON
// object, else as the table writeTable writes.
func writeReport(out io.Writer, asJSON bool, report any, writeTable func(io.Writer) error) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return writeTable(out)
}
