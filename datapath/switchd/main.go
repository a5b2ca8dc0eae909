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

// ParseArgs parses govn switch's arguments.
func ParseArgs(args []string) (Options, error) {
	fs := flag.NewFlagSet("switch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts := DefineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := opts.Check(); err != nil {
		return Options{}, err
	}
	return *opts, nil
}

// DefineFlags defines govn switch's flags on fs; once fs has parsed the
// command line, the returned Options hold them (see Check).
func DefineFlags(fs *flag.FlagSet) *Options {
	opts := &Options{Unixctl: DefaultUnixctl}
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
	return opts
}

// Check reports an error in options that parsed: two ports with one number.
func (o Options) Check() error {
	_, err := numberPorts(o.Ports)
	return err
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
			return fmt.Errorf("reading flows: %w", err)
		}
		rules, err = ParseFlows(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", opts.Flows, err)
		}
	}
	specs, err := numberPorts(opts.Ports)
	if err != nil {
		return err
	}
	// The socket first: a second switch on the same socket must fail
	// before it grabs any device.
	var l net.Listener
	if opts.Unixctl != "" {
		if l, err = unixctl.Listen(opts.Unixctl); err != nil {
			return fmt.Errorf("control socket: %w", err)
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
			return fmt.Errorf("opening port %s (%s): %w", spec.Name, spec.Kind, err)
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
