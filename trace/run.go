package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/controller"
	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/xlate"
	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// Options say what to trace.
type Options struct {
	// Datapath is the logical switch or router the packet enters (its
	// name or Datapath_Binding UUID), as ovn-trace takes it.
	Datapath string
	// Microflow is the packet (see ParseMicroflow).
	Microflow string
	// Chassis is the chassis whose datapath is modelled; empty: the one
	// the input port is bound to.
	Chassis string
	// Timeout bounds the wait for the in-memory datapath (default 10 s).
	Timeout time.Duration
}

// Run traces one packet: it compiles the Southbound as the chassis's
// controller does (package controller's Translate), installs the rules in
// an in-memory datapath with a connection tracker (the datapath govn
// chassis runs, with channel ports), sends the packet in by the input
// port's interface, records every slow-path translation with its trace
// (one per recirculation) and reads back the megaflows it installed.
// Each rule and each megaflow field is then explained by the logical flow
// whose cookie it carries and the Northbound row behind it (nb may be
// nil: the rows are then named by the Southbound alone).
func Run(ctx context.Context, s *Southbound, n *Northbound, opts Options) (*Result, error) {
	st, err := lflow.NewSymtab()
	if err != nil {
		return nil, fmt.Errorf("trace: logical flow symbols: %w", err)
	}
	mf, err := ParseMicroflow(st, opts.Microflow)
	if err != nil {
		return nil, err
	}
	ix := newIndex(s, n)
	dpRow := ix.datapath(opts.Datapath)
	if dpRow == nil {
		return nil, fmt.Errorf("trace: no logical datapath %q in the southbound", opts.Datapath)
	}
	in := ix.portByName[mf.Inport]
	if in == nil {
		return nil, fmt.Errorf("trace: no logical port %q in the southbound", mf.Inport)
	}
	if in.Datapath != dpRow.UUID {
		return nil, fmt.Errorf("trace: port %q is on %s, not on %s", mf.Inport, ix.dpName(in.Datapath), ix.dpName(dpRow.UUID))
	}
	chName := opts.Chassis
	if chName == "" {
		if in.Chassis == nil || ix.chassis[*in.Chassis] == nil {
			return nil, fmt.Errorf("trace: port %q is bound to no chassis; name the chassis to model", mf.Inport)
		}
		chName = ix.chassis[*in.Chassis].Name
	}
	input, ports, tunnel := ix.chassisInput(chName, mf.Inport)
	inNo := ports[mf.Inport]

	tr, err := controller.NewTranslator()
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	out := tr.Translate(input)
	pipe := dp.NewPipeline()
	rules, groups := canonical(out.Rules, out.Groups)
	var b flow.Bundle
	for _, g := range groups {
		b.AddGroup(g)
	}
	for _, r := range rules {
		b.Add(r)
	}
	if _, err := pipe.Apply(b); err != nil {
		return nil, fmt.Errorf("trace: installing the chassis's rules: %w", err)
	}

	key := mf.Key
	key.Set(flow.InPort, uint64(inNo))
	frame, err := BuildFrame(&key, &mf.Given)
	if err != nil {
		return nil, fmt.Errorf("trace: microflow %q: %w", opts.Microflow, err)
	}
	passes, megaflows, err := runDatapath(ctx, pipe, ports, tunnel, inNo, frame, opts.Timeout)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Microflow: opts.Microflow,
		Datapath:  ix.dpName(dpRow.UUID),
		Chassis:   chName,
		Inport:    mf.Inport,
		InPort:    inNo,
		Defaults:  mf.Defaults,
		Problems:  out.Problems,
	}
	res.Packet = keyString(&key)
	for name, no := range ports {
		res.Ports = append(res.Ports, PortNumber{Name: name, Number: no})
	}
	sort.Slice(res.Ports, func(i, j int) bool { return res.Ports[i].Number < res.Ports[j].Number })
	if tunnel != 0 {
		res.Ports = append(res.Ports, PortNumber{Name: "(geneve tunnel)", Number: tunnel})
	}
	ix.explain(res, passes, megaflows, pipe.Tables())
	return res, nil
}

// PortNumber is an interface of the modelled chassis.
type PortNumber struct {
	Name   string `json:"name"`
	Number uint32 `json:"number"`
}

// pass is one slow-path translation: the key it got (recirc_id and
// conntrack state included) and its result with a trace.
type pass struct {
	key flow.Key
	res xlate.Result
}

// recorder is the datapath's slow path with tracing on: it keeps every
// translation.
type recorder struct {
	*dp.Pipeline
	mu     sync.Mutex
	passes []pass
}

func (r *recorder) Translate(k *flow.Key, opts xlate.Options) xlate.Result {
	opts.Trace = true
	res := r.Pipeline.Translate(k, opts)
	r.mu.Lock()
	r.passes = append(r.passes, pass{key: *k, res: res})
	r.mu.Unlock()
	return res
}

// runDatapath runs an in-memory datapath over pipe with a channel port
// for every interface, sends frame in by port inNo and returns the
// translations and the megaflows installed once the packet is through.
func runDatapath(ctx context.Context, pipe *dp.Pipeline, ports map[string]uint32, tunnel, inNo uint32, frame []byte, timeout time.Duration) ([]pass, []dp.Megaflow, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	rec := &recorder{Pipeline: pipe}
	ct := conntrack.New(conntrack.Config{})
	defer ct.Close()
	d, err := dp.New(dp.Config{Flows: rec, Conntrack: ct, IdleTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, fmt.Errorf("trace: datapath: %w", err)
	}
	chans := map[uint32]*port.Channel{}
	add := func(name string, no uint32) error {
		c := port.NewChannel(name, 16, false)
		chans[no] = c
		return d.AddPort(no, c)
	}
	for name, no := range ports {
		if err := add(name, no); err != nil {
			return nil, nil, fmt.Errorf("trace: datapath: %w", err)
		}
	}
	if tunnel != 0 {
		if err := add("geneve", tunnel); err != nil {
			return nil, nil, fmt.Errorf("trace: datapath: %w", err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if err := chans[inNo].Inject(frame, port.Offload{}); err != nil {
		return nil, nil, fmt.Errorf("trace: sending the packet: %w", err)
	}
	// The worker counts the packet under the lock it holds until the
	// packet and its recirculations are done; Megaflows takes that lock,
	// so once the count shows, Megaflows sees the finished result.
	deadline := time.Now().Add(timeout)
	for d.Stats().Packets == 0 {
		if time.Now().After(deadline) {
			return nil, nil, errors.New("trace: the datapath did not take the packet in time")
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	mfs := d.Megaflows()
	rec.mu.Lock()
	passes := append([]pass(nil), rec.passes...)
	rec.mu.Unlock()
	return passes, mfs, nil
}

// index is the Southbound (and Northbound) looked up by what rules say.
type index struct {
	s           *Southbound
	n           *Northbound
	dps         map[ovsdb.UUID]*sb.DatapathBinding
	dpByKey     map[int64]*sb.DatapathBinding
	portByName  map[string]*sb.PortBinding
	portByKey   map[[2]int64]string // (datapath key, port key) → name
	chassis     map[ovsdb.UUID]*sb.Chassis
	flowsByCook map[uint32][]*sb.LogicalFlow
	groups      map[ovsdb.UUID][]ovsdb.UUID
	lbByCook    map[uint32]*sb.LoadBalancer
}

func newIndex(s *Southbound, n *Northbound) *index {
	ix := &index{s: s, n: n, dps: map[ovsdb.UUID]*sb.DatapathBinding{}, dpByKey: map[int64]*sb.DatapathBinding{},
		portByName: map[string]*sb.PortBinding{}, portByKey: map[[2]int64]string{}, chassis: map[ovsdb.UUID]*sb.Chassis{},
		flowsByCook: map[uint32][]*sb.LogicalFlow{}, groups: map[ovsdb.UUID][]ovsdb.UUID{}, lbByCook: map[uint32]*sb.LoadBalancer{}}
	for i := range s.Datapaths {
		d := &s.Datapaths[i]
		ix.dps[d.UUID] = d
		ix.dpByKey[d.TunnelKey] = d
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		ix.portByName[p.LogicalPort] = p
		if d := ix.dps[p.Datapath]; d != nil {
			ix.portByKey[[2]int64{d.TunnelKey, p.TunnelKey}] = p.LogicalPort
		}
	}
	for i := range s.Multicast {
		m := &s.Multicast[i]
		if d := ix.dps[m.Datapath]; d != nil {
			ix.portByKey[[2]int64{d.TunnelKey, m.TunnelKey}] = m.Name
		}
	}
	for i := range s.Chassis {
		ix.chassis[s.Chassis[i].UUID] = &s.Chassis[i]
	}
	for i := range s.Flows {
		f := &s.Flows[i]
		c := uuidPrefix32(f.UUID)
		ix.flowsByCook[c] = append(ix.flowsByCook[c], f)
	}
	for _, g := range s.DPGroups {
		ix.groups[g.UUID] = g.Datapaths
	}
	for i := range s.LoadBalancers {
		ix.lbByCook[uuidPrefix32(s.LoadBalancers[i].UUID)] = &s.LoadBalancers[i]
	}
	return ix
}

// datapath finds a datapath by name or UUID.
func (ix *index) datapath(s string) *sb.DatapathBinding {
	for i := range ix.s.Datapaths {
		d := &ix.s.Datapaths[i]
		if d.UUID.String() == s || d.ExternalIDs["name"] == s {
			return d
		}
	}
	return nil
}

func (ix *index) dpName(id ovsdb.UUID) string {
	if d := ix.dps[id]; d != nil {
		if n := d.ExternalIDs["name"]; n != "" {
			return n
		}
	}
	return id.String()
}

// isVIF reports whether a port is one an interface binds.
func isVIF(p *sb.PortBinding) bool {
	switch p.Type {
	case "", "virtual", "external", "localport":
		return true
	}
	return false
}

// chassisInput is the controller's Input for chassis name: the
// Southbound, an interface for each VIF bound there (and for the input
// port, wherever it is bound), numbered from 1 in name order, a Geneve
// port after them if there are other chassis, and conntrack zones
// numbered in name order (ports, then routers' DNAT and SNAT zones).
func (ix *index) chassisInput(name, inport string) (*controller.Input, map[string]uint32, uint32) {
	s := ix.s
	in := &controller.Input{
		Chassis: name, Datapaths: s.Datapaths, Ports: s.Ports, Flows: s.Flows, DPGroups: s.DPGroups,
		Multicast: s.Multicast, AddressSets: s.AddressSets, PortGroups: s.PortGroups, AllChassis: s.Chassis,
		Encaps: s.Encaps, HAChassisGroups: s.HAChassisGroups, HAChassis: s.HAChassis, GatewayChassis: s.GatewayChassis,
		MACBindings: s.MACBindings, StaticMACBindings: s.StaticMACBindings, FDBs: s.FDBs, LoadBalancers: s.LoadBalancers,
		VIFs: map[string]uint32{}, Zones: map[string]uint16{},
	}
	others := false
	for _, c := range s.Chassis {
		if c.Name == name {
			in.ChassisUUID = c.UUID
		} else {
			others = true
		}
	}
	var names []string
	for i := range s.Ports {
		p := &s.Ports[i]
		here := p.Chassis != nil && *p.Chassis == in.ChassisUUID && !in.ChassisUUID.IsZero()
		if isVIF(p) && (here || p.LogicalPort == inport) {
			names = append(names, p.LogicalPort)
		}
	}
	sort.Strings(names)
	ports := map[string]uint32{}
	zone := uint16(0)
	for i, n := range names {
		ports[n] = uint32(i + 1)
		in.VIFs[n] = uint32(i + 1)
		zone++
		in.Zones[n] = zone
	}
	var routers []*sb.DatapathBinding
	for i := range s.Datapaths {
		if _, ok := s.Datapaths[i].ExternalIDs["logical-router"]; ok {
			routers = append(routers, &s.Datapaths[i])
		}
	}
	sort.Slice(routers, func(i, j int) bool { return ix.dpName(routers[i].UUID) < ix.dpName(routers[j].UUID) })
	for _, r := range routers {
		zone++
		in.Zones["dnat:"+r.UUID.String()] = zone
		zone++
		in.Zones["snat:"+r.UUID.String()] = zone
	}
	var tunnel uint32
	if others {
		tunnel = uint32(len(names) + 1)
		in.TunnelPort = tunnel
	}
	return in, ports, tunnel
}

// canonical makes the compiled rules independent of the Southbound's
// UUIDs, which differ from one northd run to the next: the rules are
// installed in an order of their contents (the classifier's subtables,
// and so the rules a megaflow field is explained by, follow insertion
// order), and groups are numbered 1, 2, ... in the order of their
// buckets (a select group's id is the basis of its hash, so this makes
// the load balancer's choice of backend the same on every run). The
// model then differs from a running chassis in its group ids only.
func canonical(rules []flow.Rule, groups []flow.GroupDef) ([]flow.Rule, []flow.GroupDef) {
	text := func(r *flow.Rule) string {
		return fmt.Sprintf("%03d %05d %s %s", r.Table, 65535-int(r.Priority), r.Match.String(), flow.ActionsString(r.Actions))
	}
	gs := append([]flow.GroupDef(nil), groups...)
	gtext := func(g *flow.GroupDef) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%d %d", g.Type, g.Method)
		for _, k := range g.Buckets {
			fmt.Fprintf(&b, " %d:%s", k.Weight, flow.ActionsString(k.Actions))
		}
		return b.String()
	}
	sort.SliceStable(gs, func(i, j int) bool { return gtext(&gs[i]) < gtext(&gs[j]) })
	ids := map[uint32]uint32{}
	for i := range gs {
		ids[gs[i].ID] = uint32(i + 1)
		gs[i].ID = uint32(i + 1)
	}
	var renumber func(as []flow.Action) []flow.Action
	renumber = func(as []flow.Action) []flow.Action {
		out := make([]flow.Action, len(as))
		for i, a := range as {
			switch a := a.(type) {
			case flow.Group:
				if n, ok := ids[a.ID]; ok {
					a.ID = n
				}
				out[i] = a
			case flow.Clone:
				out[i] = flow.Clone{Actions: renumber(a.Actions)}
			default:
				out[i] = a
			}
		}
		return out
	}
	for i := range gs {
		bs := append([]flow.Bucket(nil), gs[i].Buckets...)
		for j := range bs {
			bs[j].Actions = renumber(bs[j].Actions)
		}
		gs[i].Buckets = bs
	}
	rs := append([]flow.Rule(nil), rules...)
	for i := range rs {
		rs[i].Actions = renumber(rs[i].Actions)
	}
	sort.SliceStable(rs, func(i, j int) bool { return text(&rs[i]) < text(&rs[j]) })
	return rs, gs
}
