package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/govn/govn/bench/dpbench"
)

// benchDatapathCommand is "govn bench datapath [--json]": the real OVS
// userspace datapath and govn's, one after the other, on the same
// namespaces (see package dpbench). The bench re-executes this binary
// inside namespaces as "govn bench datapath-internal".
func benchDatapathCommand() *command {
	return &command{
		name:    "datapath",
		summary: "govn's userspace datapath against OVS's, on the same network namespaces (root)",
		usage:   "[--json] [--seconds=N (0<N<=30)] [--rounds=N (1..5)] [-v]",
		setup: func(fs *flag.FlagSet) leaf {
			asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
			seconds := fs.Float64("seconds", 5, "duration of each measurement")
			rounds := fs.Int("rounds", 2, "times to alternate the switches (figures are means)")
			verbose := fs.Bool("v", false, "log progress to stderr")
			return leaf{run: func(ctx context.Context, s stdio, _ []string) error {
				if *seconds <= 0 || *seconds > 30 || *rounds < 1 || *rounds > 5 {
					return fmt.Errorf("%w: --seconds must be in (0,30] and --rounds in 1..5", errUsage)
				}
				return benchDatapath(ctx, s, *asJSON, *seconds, *rounds, *verbose)
			}}
		},
	}
}

func benchDatapath(ctx context.Context, s stdio, asJSON bool, seconds float64, rounds int, verbose bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the govn binary: %w", err)
	}
	opts := dpbench.Options{
		Self:     self,
		SelfArgs: []string{"bench", dpbenchInternal},
		Duration: time.Duration(seconds * float64(time.Second)),
		Rounds:   rounds,
	}
	if verbose {
		opts.Log = slog.New(slog.NewTextHandler(s.err, nil))
	}
	r, err := dpbench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(s.out).Encode(r)
	}
	r.WriteTable(s.out)
	return nil
}
