package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/govn/govn/bench/ctbench"
)

// runBenchConntrack is "govn bench conntrack [--json] [--quick] [--no-ovs]":
// govn's connection tracker against the goals and, side by side,
// OVS's userspace conntrack zone flush.
func runBenchConntrack(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench conntrack", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	quick := fs.Bool("quick", false, "small sizes (1,000 zones) for a smoke run")
	noOVS := fs.Bool("no-ovs", false, "skip the real OVS side")
	onlyOVS := fs.Bool("only-ovs", false, "measure only the real OVS side (and govn with its layout)")
	ovsFill := fs.Duration("ovs-fill", 0, "time allowed for creating OVS conntrack entries (default 40s)")
	if err := parseFlags(fs, args, "govn bench conntrack [--json] [--quick] [--no-ovs|--only-ovs] [--ovs-fill=DURATION]"); err != nil {
		return err
	}
	opts := ctbench.DefaultOptions()
	if *quick {
		opts.BigZones, opts.Flushes, opts.PauseEntries, opts.PauseRuns = 1000, 50, 20000, 3
		opts.OVSFill = 5 * time.Second
	}
	if *ovsFill > 0 {
		opts.OVSFill = *ovsFill
	}
	opts.OVS = !*noOVS
	opts.OVSOnly = *onlyOVS
	opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	rep, err := ctbench.Run(ctx, opts)
	if err != nil {
		return fmt.Errorf("bench conntrack: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteTable(os.Stdout)
	return nil
}
