package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/govn/govn/trace"
)

// traceCommand is "govn trace [--db=SB] [--ovnnb=NB] [--chassis=NAME]
// [--json] DATAPATH MICROFLOW": one packet through the logical pipelines,
// the chassis's datapath rules and the megaflows, joined (package trace).
func traceCommand() *command {
	return &command{
		name:    "trace",
		summary: "follow a packet through the logical pipelines, the datapath rules and the megaflow, each explained by its logical flow",
		usage:   "[--db=SB] [--ovnnb=NB] [--chassis=NAME|CTLSOCKET] [--json] DATAPATH MICROFLOW",
		details: `DATAPATH is the logical switch or router the packet enters (name or UUID)
and MICROFLOW the packet, in the logical flow language, as ovn-trace takes
them: 'inport == "vm1" && eth.src == 0a:00:00:00:01:11 && eth.dst == 0a:00:00:00:01:01 &&
ip4.src == 10.0.1.11 && ip4.dst == 172.16.0.100 && tcp.dst == 80'.
The Southbound (govn's or the real ovn-northd's) is compiled as the chassis's
controller compiles it, into an in-memory datapath with a connection
tracker; the packet (the first of its connection: a TCP SYN, an echo
request) is sent in by the input port. The output has three sections: the
logical flows it ran, with the Northbound row that made each (an ACL, a load
balancer, a port: from the flow's stage-hint, the port it names or its
datapath; --ovnnb names them fully); the datapath rules of each pass (one
per recirculation) with the logical flow behind each; and the megaflows
installed, each matched field with the rule and logical flow that made
the megaflow match it. A packet sent into a tunnel is followed on the
chassis it reaches.
--chassis names the chassis to model (default: the one the input port is
bound to); a path (with a /) is instead a running govn chassis's control
socket: the model takes that chassis's interface numbers and conntrack
zones, and the first chassis's pass is checked against the chassis's own
ofproto/trace of the same packet (the output says whether they agree).`,
		minArgs: 2, maxArgs: 2,
		setup: func(fs *flag.FlagSet) leaf {
			db := fs.String("db", envOr(os.Getenv, "OVN_SB_DB", "unix:/var/run/ovn/ovnsb_db.sock"), "the Southbound `DATABASE`")
			nbDB := fs.String("ovnnb", os.Getenv("OVN_NB_DB"), "the Northbound `DATABASE`, to name the rows behind the flows (default $OVN_NB_DB; none: named from the Southbound)")
			chassis := fs.String("chassis", "", "the chassis `NAME` whose datapath to model (default: the one the input port is bound to), or a running govn chassis's control socket (a path)")
			asJSON := fs.Bool("json", false, "print one JSON object")
			timeout := fs.Duration("timeout", 30*time.Second, "give up reading the databases and tracing after this long")
			return leaf{run: func(ctx context.Context, s stdio, args []string) error {
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				sbRows, nbRows, err := trace.Load(ctx, *db, *nbDB)
				if err != nil {
					return err
				}
				opts := trace.Options{Datapath: args[0], Microflow: args[1], Chassis: *chassis, Timeout: *timeout}
				if strings.Contains(opts.Chassis, "/") {
					opts.Chassis, opts.ChassisSocket = "", opts.Chassis
				}
				r, err := trace.Run(ctx, sbRows, nbRows, opts)
				if err != nil {
					return err
				}
				if *asJSON {
					enc := json.NewEncoder(s.out)
					enc.SetIndent("", "  ")
					return enc.Encode(r)
				}
				return r.WriteText(s.out)
			}}
		},
	}
}
