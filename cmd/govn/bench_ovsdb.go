package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/govn/govn/bench/ovsdbbench"
)

// runBenchOVSDB implements "govn bench ovsdb [--json]": govn db and the
// real ovsdb-server side by side (see package ovsdbbench).
func runBenchOVSDB(ctx context.Context, args []string) error {
	const synopsis = "govn bench ovsdb [--json] [--quick] [--subject=govn|ovsdb-server] [--inserts=both|default|durable] [--durable] [--measure=inserts,fanout,initial] [--rounds=N] [--commits=N] [--inserts-count=N] [-v] [--keep]"
	fs := flag.NewFlagSet("govn bench ovsdb", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	subject := fs.String("subject", "govn", "server to measure against ovsdb-server: `govn` or ovsdb-server (to check the bench itself)")
	quick := fs.Bool("quick", false, "smaller sizes and shorter runs, for a smoke test")
	verbose := fs.Bool("v", false, "log progress to stderr")
	durable := fs.Bool("durable", false, "measure inserts only in durable mode (each transaction ends with a durable commit, so both servers fsync before replying)")
	inserts := fs.String("inserts", "both", "insert modes to measure: `both`, default (plain transactions) or durable")
	measure := fs.String("measure", "", "comma-separated measurements to run: inserts, fanout, initial (default all)")
	rounds := fs.Int("rounds", 0, "alternating rounds of each measurement (default 3)")
	commits := fs.Int("commits", 0, "fan-out commits to time, spread over the rounds (default 300)")
	insertCount := fs.Int("inserts-count", 0, "insert transactions per throughput measurement from one client, 4x that from many (default 4000)")
	keep := fs.Bool("keep", false, "keep the servers' directories (databases, logs) for inspection")
	if err := parseFlags(fs, args, synopsis); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected argument %q\nusage: %s", errUsage, fs.Arg(0), synopsis)
	}
	baseline, err := ovsdbbench.OvsdbServer()
	if err != nil {
		return err
	}
	var target ovsdbbench.Target
	switch *subject {
	case "govn":
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the govn binary: %w", err)
		}
		target = ovsdbbench.Govn(self)
	case "ovsdb-server":
		target = baseline
	default:
		return fmt.Errorf("%w: --subject must be govn or ovsdb-server", errUsage)
	}
	cfg := ovsdbbench.Config{}
	if *quick {
		cfg = ovsdbbench.Config{Inserts: 500, Rounds: 1, Clients: 4, Monitors: 20, Commits: 10, BigRows: 5000}
	}
	cfg.KeepTempDirs = *keep
	if *measure != "" {
		cfg.Measure = strings.Split(*measure, ",")
	}
	if *rounds > 0 {
		cfg.Rounds = *rounds
	}
	if *commits > 0 {
		cfg.Commits = *commits
	}
	if *insertCount > 0 {
		cfg.Inserts = *insertCount
	}
	switch {
	case *durable || *inserts == ovsdbbench.ModeDurable:
		cfg.InsertModes = []string{ovsdbbench.ModeDurable}
	case *inserts == ovsdbbench.ModeDefault:
		cfg.InsertModes = []string{ovsdbbench.ModeDefault}
	case *inserts != "both":
		return fmt.Errorf("%w: --inserts must be both, default or durable", errUsage)
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	report, err := ovsdbbench.Run(ctx, target, baseline, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return report.WriteTable(os.Stdout)
}
