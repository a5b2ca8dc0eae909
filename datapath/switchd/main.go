package switchd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/unixctl"
)

// DefaultUnixctl is the control socket's default path.
const DefaultUnixctl = "/run/govn/switch.ctl"

// Options are govn switch's command line.
type Options struct {
	Unixctl string // control socket path; "" for none
	Flows   string // flow file; "" for empty tables
	Ports   []PortSpec
}

// Usage is the synopsis of govn switch's arguments, with how to write a
// tunnel port.
const Usage = `govn switch [--unixctl=PATH] [--flows=FILE] [--port NAME[:NUMBER][=KIND]]...
  KIND is afpacket (default: NAME is an existing device), tap, internal,
  or a tunnel, NAME then being only a label:
    geneve:LOCALIP[:UDPPORT]   Geneve (UDP port 6081 by default)
    vxlan:LOCALIP[:UDPPORT]    VXLAN, 24-bit VNI only (UDP port 4789 by default)
  A tunnel port receives on LOCALIP and UDPPORT and sends each frame to
  UDPPORT at the tun_dst its rules set, with tun_id as VNI (and, for Geneve,
  tun_metadata0 in OVN's option), as OVN's physical flows do:
    --port vm1:1 --port tun:9=geneve:192.168.10.1 with the rules
    in_port=1 actions=set_field:5->tun_id,set_field:192.168.10.2->tun_dst,output:9
    in_port=9,tun_id=5 actions=output:1`

// ParseArgs parses govn switch's arguments.
func ParseArgs(args []string) (Options, error) {
	opts := Options{Unixctl: DefaultUnixctl}
	fs := flag.NewFlagSet("switch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&opts.Unixctl, "unixctl", opts.Unixctl, "answer ovs-appctl commands on the unix socket `PATH` (\"\" for none)")
	fs.StringVar(&opts.Flows, "flows", "", "load the flow tables from `FILE`, one rule per line")
	fs.Func("port", "attach `NAME[:NUMBER][=KIND]`, KIND afpacket (default), tap, internal, geneve:LOCALIP[:UDPPORT] or vxlan:LOCALIP[:UDPPORT]", func(s string) error {
		spec, err := ParsePortSpec(s)
		if err != nil {
			return err
		}
		opts.Ports = append(opts.Ports, spec)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if _, err := numberPorts(opts.Ports); err != nil {
		return Options{}, err
	}
	return opts, nil
}

// openPort opens the device of spec.
func openPort(spec PortSpec) (port.Port, error) {
	switch spec.Kind {
	case KindTAP:
		return port.NewTAP(spec.Name)
	case KindInternal:
		return port.NewInternal(spec.Name)
	case KindGeneve, KindVXLAN:
		e, err := port.ParseEncap(spec.Kind)
		if err != nil {
			return nil, err
		}
		return port.NewUDPTunnel(e, spec.Local, spec.Local.Port())
	default:
		return port.NewAFPacket(spec.Name)
	}
}

// Main runs govn switch: it opens the ports, loads the flows, listens on
// the control socket and forwards until ctx ends or "exit".
func Main(ctx context.Context, opts Options, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	var rules []flow.Rule
	if opts.Flows != "" {
		f, err := os.Open(opts.Flows)
		if err != nil {
			return fmt.Errorf("switch: flows: %w", err)
		}
		rules, err = ParseFlows(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("switch: %s: %w", opts.Flows, err)
		}
	}
	specs, err := numberPorts(opts.Ports)
	if err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	// The socket first: a second switch on the same socket must fail
	// before it grabs any device.
	var l net.Listener
	if opts.Unixctl != "" {
		if l, err = unixctl.Listen(opts.Unixctl); err != nil {
			return fmt.Errorf("switch: %w", err)
		}
		defer os.Remove(opts.Unixctl)
	}
	var ports []Port
	for _, spec := range specs {
		p, err := openPort(spec)
		if err != nil {
			for _, q := range ports {
				q.Port.Close()
			}
			if l != nil {
				l.Close()
			}
			return fmt.Errorf("switch: open port %s (%s): %w", spec.Name, spec.Kind, err)
		}
		ports = append(ports, Port{No: spec.No, Kind: spec.Kind, Port: p})
	}
	sw, err := New(Config{Ports: ports, Rules: rules, Logger: log})
	if err != nil {
		if l != nil {
			l.Close()
		}
		return err
	}
	log.Info("switch running", "ports", len(ports), "rules", len(rules), "unixctl", opts.Unixctl)
	err = sw.Run(ctx, l)
	st := sw.Datapath().Stats()
	log.Info("switch stopped", "packets", st.Packets, "upcalls", st.Upcalls, "megaflows", st.Megaflows, "err", err)
	return err
}
