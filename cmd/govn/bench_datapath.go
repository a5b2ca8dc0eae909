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

// runBenchDatapath implements "govn bench datapath [--json]": the real OVS
// userspace datapath and govn's, one after the other, on the same
// namespaces (see package dpbench). The bench re-executes this binary
// inside namespaces with the hidden first arguments --internal-traffic
// (a traffic tool) and --internal-switch (the govn switch).
func runBenchDatapath(ctx context.Context, args []string) error {
	if ok, err := dpbench.Internal(ctx, args); ok {
		return err
	}
	const synopsis = "govn bench datapath [--json] [--seconds=N (0<N<=30)] [--rounds=N (1..5)] [-v]"
	fs := flag.NewFlagSet("govn bench datapath", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	seconds := fs.Float64("seconds", 5, "duration of each measurement")
	rounds := fs.Int("rounds", 2, "times to alternate the switches (figures are means)")
	verbose := fs.Bool("v", false, "log progress to stderr")
	if err := parseFlags(fs, args, synopsis); err != nil {
		return err
	}
	if fs.NArg() != 0 || *seconds <= 0 || *seconds > 30 || *rounds < 1 || *rounds > 5 {
		return fmt.Errorf("%w: usage: %s", errUsage, synopsis)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the govn binary: %w", err)
	}
	opts := dpbench.Options{
		Self:     self,
		SelfArgs: []string{"bench", "datapath"},
		Duration: time.Duration(*seconds * float64(time.Second)),
		Rounds:   *rounds,
	}
	if *verbose {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	r, err := dpbench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	r.WriteTable(os.Stdout)
	return nil
}
