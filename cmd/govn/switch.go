package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/govn/govn/datapath/switchd"
)

// switchCommand is "govn switch": the userspace datapath on real ports,
// with an ovs-appctl control socket (package switchd).
func switchCommand() *command {
	return &command{
		name:    "switch",
		summary: "run the userspace datapath on ports, with an ovs-appctl control socket (root)",
		usage:   "[--unixctl=PATH] [--flows=FILE] [--port NAME[:NUMBER][=KIND]]...",
		details: switchDetails,
		setup: func(fs *flag.FlagSet) leaf {
			opts := switchd.DefineFlags(fs)
			return leaf{run: func(ctx context.Context, _ stdio, _ []string) error {
				if err := opts.Check(); err != nil {
					return err
				}
				return switchd.Main(ctx, *opts, slog.Default())
			}}
		},
	}
}

// switchDetails ends govn switch's help.
const switchDetails = `KIND is afpacket (default: NAME is an existing device), tap, internal,
or a tunnel, NAME then being only a label:
  geneve:LOCALIP[:UDPPORT]   Geneve (UDP port 6081 by default)
  vxlan:LOCALIP[:UDPPORT]    VXLAN, 24-bit VNI only (UDP port 4789 by default)
A tunnel port receives on LOCALIP and UDPPORT and sends each frame to
UDPPORT at the tun_dst its rules set, with tun_id as VNI (and, for Geneve,
tun_metadata0 in OVN's option), as OVN's physical flows do:
  --port vm1:1 --port tun:9=geneve:192.168.10.1 with the rules
  in_port=1 actions=set_field:5->tun_id,set_field:192.168.10.2->tun_dst,output:9
  in_port=9,tun_id=5 actions=output:1
The flow file holds one rule per line in ovs-ofctl's syntax. Inspect the
switch with govn appctl (or ovs-appctl -t /run/govn/switch.ctl); docs/switch.md
lists its commands.`
