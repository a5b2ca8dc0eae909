package dpbench

import (
	"context"
	"fmt"
	"os"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/systest/traffic"
)

// readyLine is what the switch process prints once its ports are open.
const readyLine = "ready"

// SwitchMain runs the govn switch of the bench: AF_PACKET ports on the
// devices named in args (port numbers 1, 2, ... in order) and, for two
// ports, the flows in_port=1 → output:2 and in_port=2 → output:1. It
// prints readyLine when forwarding and runs until ctx ends.
func SwitchMain(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("want 2 device names, have %d", len(args))
	}
	p := dp.NewPipeline()
	var b flow.Bundle
	for i := range 2 {
		var m flow.Match
		m.Set(flow.InPort, uint64(i+1))
		b.Add(flow.Rule{Table: 0, Priority: 100, Match: m, Actions: []flow.Action{flow.Output{Port: uint32(2 - i)}}})
	}
	if _, err := p.Apply(b); err != nil {
		return fmt.Errorf("installing flows: %w", err)
	}
	d, err := dp.New(dp.Config{Flows: p})
	if err != nil {
		return err
	}
	for i, name := range args {
		pt, err := port.NewAFPacket(name)
		if err != nil {
			return err
		}
		if err := d.AddPort(uint32(i+1), pt); err != nil {
			return err
		}
	}
	fmt.Fprintln(os.Stdout, readyLine)
	err = d.Run(ctx)
	if os.Getenv("GOVN_DPBENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "switch: %+v\n", d.Stats())
		for no, s := range d.PortStats() {
			fmt.Fprintf(os.Stderr, "port %d: %+v\n", no, s)
		}
	}
	return err
}

// Internal runs the modes the bench re-executes its binary in: with args
// "--internal-traffic TOOL ARGS..." a traffic tool, with
// "--internal-switch DEVICES..." the govn switch (SwitchMain). It reports
// false for any other arguments.
func Internal(ctx context.Context, args []string) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case "--internal-traffic":
		return true, traffic.Main(ctx, args[1:])
	case "--internal-switch":
		return true, SwitchMain(ctx, args[1:])
	}
	return false, nil
}
