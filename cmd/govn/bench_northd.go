package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/govn/govn/bench/northdbench"
)

// benchNorthdCommand is "govn bench northd --nodes N [--json]": govn
// northd and the real ovn-northd side by side on an ovn-kubernetes-like
// Northbound (see package northdbench).
func benchNorthdCommand() *command {
	return &command{
		name:    "northd",
		summary: "govn northd against the real ovn-northd on an ovn-kubernetes-like cluster",
		usage:   "[--nodes=N] [--json] [--changes=N] [--recomputes=N] [--govn-on-ovsdb-server] [--no-ovn] [--services=N] [--pods=N] [--namespaces=N] [--print-nb] [-v] [--keep]",
		setup: func(fs *flag.FlagSet) leaf {
			var f northdBenchFlags
			fs.IntVar(&f.nodes, "nodes", 20, "cluster `N`odes")
			fs.BoolVar(&f.asJSON, "json", false, "print one JSON object instead of a table")
			fs.IntVar(&f.changes, "changes", 20, "changes of each kind to time")
			fs.IntVar(&f.recomputes, "recomputes", 3, "full recomputes to time (the median is kept)")
			fs.IntVar(&f.services, "services", 0, "load balancers (default: one a node, at least 10)")
			fs.IntVar(&f.pods, "pods", 0, "pods a node (default 30)")
			fs.IntVar(&f.namespaces, "namespaces", 0, "namespaces, each with a network policy (default 10)")
			fs.BoolVar(&f.printNB, "print-nb", false, "print the Northbound as the params of one OVSDB transact (for ovsdb-client transact) and exit")
			fs.BoolVar(&f.govnOvsdb, "govn-on-ovsdb-server", false, "also run govn northd on the real ovsdb-server")
			fs.BoolVar(&f.noOVN, "no-ovn", false, "run govn northd alone, without ovn-northd (for clusters it would take minutes on)")
			fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
			fs.BoolVar(&f.keep, "keep", false, "keep the databases and logs for inspection")
			return leaf{run: func(ctx context.Context, s stdio, _ []string) error {
				return benchNorthd(ctx, s, f)
			}}
		},
	}
}

// northdBenchFlags are govn bench northd's flags.
type northdBenchFlags struct {
	nodes, changes, recomputes, services, pods, namespaces int
	asJSON, govnOvsdb, noOVN, verbose, keep, printNB       bool
}

func benchNorthd(ctx context.Context, s stdio, f northdBenchFlags) error {
	if f.nodes < 1 || f.nodes > 4000 {
		return fmt.Errorf("%w: --nodes must be 1 to 4000", errUsage)
	}
	shape := northdbench.Shape{Nodes: f.nodes, Services: f.services, PodsPerNode: f.pods, Namespaces: f.namespaces}
	if f.printNB {
		params := []any{"OVN_Northbound"}
		for _, op := range shape.Northbound() {
			params = append(params, op)
		}
		return json.NewEncoder(s.out).Encode(params)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the govn binary: %w", err)
	}
	bins, err := northdbench.FindBinaries(self)
	if err != nil {
		return err
	}
	cfg := northdbench.Config{
		Shape:             shape,
		Changes:           f.changes,
		Recomputes:        f.recomputes,
		GovnOnOvsdbServer: f.govnOvsdb,
		NoOVN:             f.noOVN,
		Keep:              f.keep,
	}
	if f.verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(s.err, nil))
	}
	report, err := northdbench.Run(ctx, bins, cfg)
	if err != nil {
		return err
	}
	return writeReport(s.out, f.asJSON, report, report.WriteTable)
}
