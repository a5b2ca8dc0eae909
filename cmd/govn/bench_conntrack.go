package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"time"

	"github.com/govn/govn/bench/ctbench"
)

// benchConntrackCommand is "govn bench conntrack [--json] [--quick]
// [--no-ovs]": govn's connection tracker against the issue's goals and,
// side by side, OVS's userspace conntrack zone flush.
func benchConntrackCommand() *command {
	return &command{
		name:    "conntrack",
		summary: "govn's connection tracker, and OVS's userspace conntrack zone flush side by side",
		usage:   "[--json] [--quick] [--no-ovs|--only-ovs] [--ovs-fill=DURATION]",
		setup: func(fs *flag.FlagSet) leaf {
			var f ctFlags
			fs.BoolVar(&f.asJSON, "json", false, "print one JSON object instead of a table")
			fs.BoolVar(&f.quick, "quick", false, "small sizes (1,000 zones) for a smoke run")
			fs.BoolVar(&f.noOVS, "no-ovs", false, "skip the real OVS side")
			fs.BoolVar(&f.onlyOVS, "only-ovs", false, "measure only the real OVS side (and govn with its layout)")
			fs.DurationVar(&f.ovsFill, "ovs-fill", 0, "time allowed for creating OVS conntrack entries (default 40s)")
			return leaf{run: func(ctx context.Context, s stdio, _ []string) error {
				return benchConntrack(ctx, s, f)
			}}
		},
	}
}

// ctFlags are govn bench conntrack's flags.
type ctFlags struct {
	asJSON, quick, noOVS, onlyOVS bool
	ovsFill                       time.Duration
}

func benchConntrack(ctx context.Context, s stdio, f ctFlags) error {
	opts := ctbench.DefaultOptions()
	if f.quick {
		opts.BigZones, opts.Flushes, opts.PauseEntries, opts.PauseRuns = 1000, 50, 20000, 3
		opts.OVSFill = 5 * time.Second
	}
	if f.ovsFill > 0 {
		opts.OVSFill = f.ovsFill
	}
	opts.OVS = !f.noOVS
	opts.OVSOnly = f.onlyOVS
	opts.Log = slog.New(slog.NewTextHandler(s.err, nil))
	rep, err := ctbench.Run(ctx, opts)
	if err != nil {
		return err
	}
	return writeReport(s.out, f.asJSON, rep, func(w io.Writer) error { rep.WriteTable(w); return nil })
}
