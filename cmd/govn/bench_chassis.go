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

// benchChassisCommand is "govn bench chassis": govn (govn db, govn
// northd, govn chassis) and the real OVN (ovn-northd, ovn-controller,
// ovs-vswitchd's userspace datapath) on the same namespaces and topology,
// each measurement on one after the other (see package chassisbench). With --port-up it
// measures only port-up latency, both clusters up at once, and with
// --flood=RATE under that many ARP misses a second on the ports'
// hypervisor. The govn side runs this binary.
func benchChassisCommand() *command {
	return &command{
		name:    "chassis",
		summary: "govn chassis against the real ovn-controller + ovs-vswitchd: HTTP, ping, iperf3, port-up, change latency, address sets (root)",
		usage: "[--json] [--no-ovn] [-v] [--requests=N] [--warm-requests=N] [--rounds=N] [--seconds=DURATION] [--pings=N] " +
			"[--ports=N] [--changes=N] [--address-set=N] [--sequential] | --port-up [--ports=N] [--timeout=DURATION] [--flood=RATE]",
		setup: func(fs *flag.FlagSet) leaf {
			portUp := fs.Bool("port-up", false, "measure only port-up latency (both clusters at once, ports bound in turn)")
			ports := fs.Int("ports", 0, "ports to bind one after another on each side (default 100 with --port-up, else 20)")
			asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
			noOVN := fs.Bool("no-ovn", false, "skip the real OVN")
			timeout := fs.Duration("timeout", 5*time.Second, "with --port-up, give up on a port whose first ping has no answer after this long")
			flood := fs.Int("flood", 0, "with --port-up, bring the ports up under this many ARP misses a second from a VM on their hypervisor")
			verbose := fs.Bool("v", false, "log every step to stderr")
			requests := fs.Int("requests", 5000, "ab -n of each timed run")
			warm := fs.Int("warm-requests", 1000, "ab -n of the run before the first datapath flow count")
			rounds := fs.Int("rounds", 3, "timed ab runs per target (the figure is their median)")
			seconds := fs.Duration("seconds", 5*time.Second, "length of each iperf3 test")
			pings := fs.Int("pings", 20, "first-packet pings per path (ten times as many steady echoes)")
			changes := fs.Int("changes", 20, "Northbound commits timed until every chassis has them")
			addrs := fs.Int("address-set", 10000, "addresses in the set of the ACL measurement")
			sequential := fs.Bool("sequential", false, "build, measure and tear down one deployment before the other (default: both up, each measurement on one then the other)")
			return leaf{run: func(ctx context.Context, s stdio, _ []string) error {
				if *ports < 0 || *ports > 1000 || *timeout <= 0 {
					return fmt.Errorf("%w: --ports must be in 1..1000 and --timeout positive", errUsage)
				}
				if *flood < 0 || *flood > 1000000 || *flood > 0 && !*portUp {
					return fmt.Errorf("%w: --flood goes with --port-up, at most 1000000 a second", errUsage)
				}
				for _, v := range []int{*requests, *warm, *rounds, *pings, *changes, *addrs} {
					if v < 1 || v > 1000000 {
						return fmt.Errorf("%w: --requests, --warm-requests, --rounds, --pings, --changes and --address-set must be in 1..1000000", errUsage)
					}
				}
				if *seconds < time.Second {
					return fmt.Errorf("%w: --seconds must be at least 1s", errUsage)
				}
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("finding the govn binary: %w", err)
				}
				level := slog.LevelInfo
				if *verbose {
					level = slog.LevelDebug
				}
				log := slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level}))
				if *portUp {
					n := *ports
					if n == 0 {
						n = 100
					}
					r, err := chassisbench.Run(ctx, chassisbench.Options{
						Govn: []string{self, "chassis"}, Ports: n, OVN: !*noOVN, Timeout: *timeout, Flood: *flood, Log: log,
					})
					if err != nil {
						return err
					}
					return writeReport(s.out, *asJSON, r, func(w io.Writer) error { r.WriteTable(w); return nil })
				}
				r, err := chassisbench.RunSuite(ctx, chassisbench.SuiteOptions{
					Govn: self, OVN: !*noOVN, Requests: *requests, WarmRequests: *warm, Rounds: *rounds,
					Seconds: *seconds, Pings: *pings, Ports: *ports, Changes: *changes, AddressSet: *addrs,
					Sequential: *sequential, Log: log,
				})
				if err != nil {
					return err
				}
				return writeReport(s.out, *asJSON, r, func(w io.Writer) error { r.WriteTable(w); return nil })
			}}
		},
	}
}
