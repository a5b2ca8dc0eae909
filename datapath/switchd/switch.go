package switchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/unixctl"
)

// Port is a port to attach: an open port.Port, its number and its kind
// (for display).
type Port struct {
	No   uint32
	Kind string
	Port port.Port
}

// Config configures a Switch.
type Config struct {
	Ports  []Port
	Rules  []flow.Rule // the initial flow tables
	Logger *slog.Logger
	// FlowLimit caps the datapath's megaflows (dp.Config.FlowLimit;
	// 0 for its default); upcall/set-flow-limit changes it.
	FlowLimit int
}

// Switch is a datapath with its flow tables, its connection tracker and
// the control commands that inspect and program them.
type Switch struct {
	dp     *dp.Datapath
	pipe   *dp.Pipeline
	ct     *conntrack.Tracker
	log    *slog.Logger
	ports  []Port // in port-number order
	closed sync.Once
	// progMu serializes flow-table changes: replace-flows reads the
	// tables, then changes them.
	progMu sync.Mutex
}

// New builds a switch over cfg's ports (it owns them from now on: they are
// closed by Run or Close) with cfg's rules installed.
func New(cfg Config) (*Switch, error) {
	s := &Switch{pipe: dp.NewPipeline(), ct: conntrack.New(conntrack.Config{}), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	fail := func(err error) (*Switch, error) {
		for _, p := range cfg.Ports {
			p.Port.Close()
		}
		s.ct.Close()
		return nil, err
	}
	if _, err := s.pipe.Apply(addBundle(cfg.Rules)); err != nil {
		return fail(fmt.Errorf("installing flows: %w", err))
	}
	d, err := dp.New(dp.Config{Flows: s.pipe, Conntrack: s.ct, Logger: s.log, FlowLimit: cfg.FlowLimit})
	if err != nil {
		return fail(fmt.Errorf("starting the datapath: %w", err))
	}
	s.dp = d
	for _, p := range cfg.Ports {
		if err := d.AddPort(p.No, p.Port); err != nil {
			// The datapath never ran, so it closed none of them.
			return fail(fmt.Errorf("adding port %d: %w", p.No, err))
		}
	}
	s.ports = append([]Port(nil), cfg.Ports...)
	sortPorts(s.ports)
	return s, nil
}

// addBundle is a bundle adding rules.
func addBundle(rules []flow.Rule) flow.Bundle {
	var b flow.Bundle
	for _, r := range rules {
		b.Add(r)
	}
	return b
}

// Run forwards packets and, if l is not nil, answers control commands on
// it, until ctx ends or the "exit" command. It closes the ports, the
// tracker and l before returning.
func (s *Switch) Run(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var serveErr error
	var wg sync.WaitGroup
	if l != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := unixctl.Serve(ctx, l, s.Commands(cancel)); err != nil {
				serveErr = err
				s.log.Error("control socket failed", "err", err)
				cancel()
			}
		}()
	}
	err := s.dp.Run(ctx)
	cancel()
	wg.Wait()
	s.Close()
	return errors.Join(err, serveErr)
}

// Close releases the connection tracker. Run calls it; call it yourself
// only for a switch that never ran.
func (s *Switch) Close() {
	s.closed.Do(func() { s.ct.Close() })
}

// Datapath returns the switch's datapath.
func (s *Switch) Datapath() *dp.Datapath { return s.dp }

// Pipeline returns the switch's flow tables.
func (s *Switch) Pipeline() *dp.Pipeline { return s.pipe }

// Conntrack returns the switch's connection tracker.
func (s *Switch) Conntrack() *conntrack.Tracker { return s.ct }
