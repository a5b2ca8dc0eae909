package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/govn/govn/bench/ovsdbbench"
)

// benchOVSDBCommand is "govn bench ovsdb [--json]": govn db and the real
// ovsdb-server side by side (see package ovsdbbench).
func benchOVSDBCommand() *command {
	return &command{
		name:    "ovsdb",
		summary: "govn db against the real ovsdb-server: inserts, monitor fan-out, initial dumps (--cluster: 3-server clusters, failover)",
		usage:   "[--cluster] [--failovers=N] [--json] [--quick] [--subject=govn|ovsdb-server] [--inserts=both|default|durable] [--durable] [--measure=inserts,fanout,initial] [--rounds=N] [--commits=N] [--inserts-count=N] [-v] [--keep]",
		setup: func(fs *flag.FlagSet) leaf {
			var f ovsdbBenchFlags
			fs.BoolVar(&f.asJSON, "json", false, "print one JSON object instead of a table")
			fs.StringVar(&f.subject, "subject", "govn", "server to measure against ovsdb-server: `govn` or ovsdb-server (to check the bench itself)")
			fs.BoolVar(&f.quick, "quick", false, "smaller sizes and shorter runs, for a smoke test")
			fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
			fs.BoolVar(&f.durable, "durable", false, "measure inserts only in durable mode (each transaction ends with a durable commit, so both servers fsync before replying)")
			fs.StringVar(&f.inserts, "inserts", "both", "insert modes to measure: `both`, default (plain transactions) or durable")
			fs.StringVar(&f.measure, "measure", "", "comma-separated measurements to run: inserts, fanout, initial (default all)")
			fs.IntVar(&f.rounds, "rounds", 0, "alternating rounds of each measurement (default 3)")
			fs.IntVar(&f.commits, "commits", 0, "fan-out commits to time, spread over the rounds (default 300)")
			fs.IntVar(&f.insertCount, "inserts-count", 0, "insert transactions per throughput measurement from one client, 4x that from many (default 4000)")
			fs.BoolVar(&f.cluster, "cluster", false, "compare 3-server clusters (govn db create-cluster/join-cluster against ovsdb-tool's): inserts to the leader, fan-out to monitors on followers, failover after kill -9 of the leader")
			fs.IntVar(&f.failovers, "failovers", 0, "with --cluster: kills of each cluster's leader (default 5)")
			fs.BoolVar(&f.keep, "keep", false, "keep the servers' directories (databases, logs) for inspection")
			return leaf{run: func(ctx context.Context, s stdio, _ []string) error {
				return benchOVSDB(ctx, s, f)
			}}
		},
	}
}

// ovsdbBenchFlags are govn bench ovsdb's flags.
type ovsdbBenchFlags struct {
	asJSON, quick, verbose, durable, keep, cluster bool
	subject, inserts, measure                      string
	rounds, commits, insertCount, failovers        int
}

func benchOVSDB(ctx context.Context, s stdio, f ovsdbBenchFlags) error {
	if f.cluster {
		return benchOVSDBCluster(ctx, s, f)
	}
	baseline, err := ovsdbbench.OvsdbServer()
	if err != nil {
		return err
	}
	var target ovsdbbench.Target
	switch f.subject {
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
	if f.quick {
		cfg = ovsdbbench.Config{Inserts: 500, Rounds: 1, Clients: 4, Monitors: 20, Commits: 10, BigRows: 5000}
	}
	cfg.KeepTempDirs = f.keep
	if f.measure != "" {
		cfg.Measure = strings.Split(f.measure, ",")
	}
	if f.rounds > 0 {
		cfg.Rounds = f.rounds
	}
	if f.commits > 0 {
		cfg.Commits = f.commits
	}
	if f.insertCount > 0 {
		cfg.Inserts = f.insertCount
	}
	switch {
	case f.durable || f.inserts == ovsdbbench.ModeDurable:
		cfg.InsertModes = []string{ovsdbbench.ModeDurable}
	case f.inserts == ovsdbbench.ModeDefault:
		cfg.InsertModes = []string{ovsdbbench.ModeDefault}
	case f.inserts != "both":
		return fmt.Errorf("%w: --inserts must be both, default or durable", errUsage)
	}
	if f.verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(s.err, nil))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	report, err := ovsdbbench.Run(ctx, target, baseline, cfg)
	if err != nil {
		return err
	}
	return writeReport(s.out, f.asJSON, report, report.WriteTable)
}

// benchOVSDBCluster is "govn bench ovsdb --cluster": govn db's and
// ovsdb-server's 3-server clusters side by side (ovsdbbench.RunCluster).
func benchOVSDBCluster(ctx context.Context, s stdio, f ovsdbBenchFlags) error {
	if f.subject != "govn" || f.measure != "" || f.durable || f.inserts != "both" {
		return fmt.Errorf("%w: --cluster takes none of --subject, --measure, --durable, --inserts", errUsage)
	}
	baseline, err := ovsdbbench.OvsdbServerCluster()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the govn binary: %w", err)
	}
	cfg := ovsdbbench.ClusterConfig{}
	if f.quick {
		cfg = ovsdbbench.ClusterConfig{Inserts: 300, Rounds: 1, Clients: 4, Monitors: 20, Commits: 10, Failovers: 1}
	}
	cfg.KeepTempDirs = f.keep
	if f.rounds > 0 {
		cfg.Rounds = f.rounds
	}
	if f.commits > 0 {
		cfg.Commits = f.commits
	}
	if f.insertCount > 0 {
		cfg.Inserts = f.insertCount
	}
	if f.failovers > 0 {
		cfg.Failovers = f.failovers
	}
	if f.verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(s.err, nil))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	report, err := ovsdbbench.RunCluster(ctx, ovsdbbench.GovnCluster(self), baseline, cfg)
	if err != nil {
		return err
	}
	return writeReport(s.out, f.asJSON, report, report.WriteTable)
}
