package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
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
	// ChassisSocket, if set, is the control socket of the running govn
	// chassis Chassis names (or the input port's): the model takes its
	// interface numbers and conntrack zones, keeps its group ids, and the
	// first hop is checked against the chassis's own ofproto/trace
	// (Hop.Live).
	ChassisSocket string
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
	if !isVIF(in) {
		return nil, fmt.Errorf("trace: port %q is a %s port; a packet enters by a VIF (or a localport)", mf.Inport, in.Type)
	}
	chName := opts.Chassis
	if chName != "" && ix.chassisNamed(chName) == nil {
		return nil, fmt.Errorf("trace: no chassis %q in the southbound", chName)
	}
	if chName == "" {
		if in.Chassis == nil || ix.chassis[*in.Chassis] == nil {
			return nil, fmt.Errorf("trace: port %q is bound to no chassis; name the chassis to model", mf.Inport)
		}
		chName = ix.chassis[*in.Chassis].Name
	}
	tr, err := controller.NewTranslator()
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	res := &Result{
		Microflow: opts.Microflow,
		Datapath:  ix.dpName(dpRow.UUID),
		Inport:    mf.Inport,
		Defaults:  mf.Defaults,
	}
	var lv *live
	if opts.ChassisSocket != "" {
		if lv, err = ix.readLive(ctx, opts.ChassisSocket); err != nil {
			return nil, err
		}
		if _, ok := lv.ports[mf.Inport]; !ok {
			return nil, fmt.Errorf("trace: port %q has no interface on the chassis at %s (is it %s?)", mf.Inport, opts.ChassisSocket, chName)
		}
	}
	m := ix.model(tr, chName, mf.Inport, lv)
	inNo := m.ports[mf.Inport]
	key := mf.Key
	key.Set(flow.InPort, uint64(inNo))
	frame, err := BuildFrame(&key, &mf.Given)
	if err != nil {
		return nil, fmt.Errorf("trace: microflow %q: %w", opts.Microflow, err)
	}
	res.Packet = keyString(&key)
	// The hops: the first chassis, then each chassis a tunnel output
	// reaches, breadth first, at most maxHops in all.
	type arrival struct {
		m      *model
		inNo   uint32
		frame  []byte
		tunnel port.Tunnel
		from   string
	}
	queue := []arrival{{m: m, inNo: inNo, frame: frame, from: fmt.Sprintf("interface %d (%s)", inNo, mf.Inport)}}
	for len(queue) > 0 && len(res.Hops) < maxHops {
		a := queue[0]
		queue = queue[1:]
		run, err := a.m.run(ctx, a.inNo, a.frame, a.tunnel, opts.Timeout)
		if err != nil {
			return nil, err
		}
		hop := Hop{Chassis: a.m.chassis, From: a.from, Ports: a.m.portList(), Problems: a.m.problems}
		ix.explain(res, &hop, run, a.m.pipe.Tables())
		if lv != nil && len(res.Hops) == 0 && len(hop.Passes) > 0 && len(hop.Megaflows) > 0 {
			hop.Live = lv.check(ctx, a.frame, a.inNo, &hop.Passes[0], &hop.Megaflows[0])
		}
		for _, o := range run.outputs {
			if !o.tunnel.Valid() {
				continue
			}
			next := ix.chassisAt(o.tunnel.Dst)
			if next == "" {
				continue
			}
			nm := ix.model(tr, next, "", nil)
			if nm.tunnel == 0 {
				continue
			}
			t := o.tunnel
			if src := ix.encapIP(a.m.chassis); src.IsValid() {
				t.Src = src
			}
			queue = append(queue, arrival{m: nm, inNo: nm.tunnel, frame: o.frame, tunnel: t,
				from: fmt.Sprintf("tunnel from %s (%s), tun_id=%d", a.m.chassis, t.Src, t.ID)})
		}
		res.Hops = append(res.Hops, hop)
	}
	return res, nil
}

// maxHops bounds the chassis a trace follows a packet through.
const maxHops = 4

// model is one chassis's datapath rules, compiled from the Southbound.
type model struct {
	chassis  string
	ports    map[string]uint32 // VIF interfaces by logical port
	tunnel   uint32            // the Geneve port, 0 if none
	pipe     *dp.Pipeline
	problems []string
	err      error
}

// model compiles the rules of chassis name, with an interface for inport
// if it is not bound there, or with the interfaces and zones of the
// running chassis lv.
func (ix *index) model(tr *controller.Translator, name, inport string, lv *live) *model {
	input, ports, tunnel := ix.chassisInput(name, inport)
	if lv != nil {
		ports, tunnel = lv.ports, lv.tunnel
		input.VIFs, input.Zones, input.TunnelPort = lv.ports, lv.zones, lv.tunnel
	}
	out := tr.Translate(input)
	m := &model{chassis: name, ports: ports, tunnel: tunnel, pipe: dp.NewPipeline(), problems: out.Problems}
	rules, groups := out.Rules, out.Groups
	if lv == nil {
		rules, groups = canonical(rules, groups)
	}
	// A model of a running chassis keeps its group ids and the
	// compiler's order of rules, as the chassis installs them.
	var b flow.Bundle
	for _, g := range groups {
		b.AddGroup(g)
	}
	for _, r := range rules {
		b.Add(r)
	}
	if _, err := m.pipe.Apply(b); err != nil {
		m.err = fmt.Errorf("trace: installing %s's rules: %w", name, err)
	}
	return m
}

func (m *model) portList() []PortNumber {
	var ps []PortNumber
	for name, no := range m.ports {
		ps = append(ps, PortNumber{Name: name, Number: no})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Number < ps[j].Number })
	if m.tunnel != 0 {
		ps = append(ps, PortNumber{Name: "(geneve tunnel)", Number: m.tunnel})
	}
	return ps
}

// chassisNamed returns the Chassis row called name.
func (ix *index) chassisNamed(name string) *sb.Chassis {
	for i := range ix.s.Chassis {
		if ix.s.Chassis[i].Name == name {
			return &ix.s.Chassis[i]
		}
	}
	return nil
}

// chassisAt returns the chassis whose Geneve encap has address ip.
func (ix *index) chassisAt(ip netip.Addr) string {
	for _, e := range ix.s.Encaps {
		if a, err := netip.ParseAddr(e.IP); err == nil && a == ip {
			return e.ChassisName
		}
	}
	return ""
}

// encapIP returns chassis name's encap address.
func (ix *index) encapIP(name string) netip.Addr {
	for _, e := range ix.s.Encaps {
		if e.ChassisName == name {
			if a, err := netip.ParseAddr(e.IP); err == nil {
				return a
			}
		}
	}
	return netip.Addr{}
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

// output is a frame the datapath sent out of a port.
type output struct {
	no     uint32
	name   string
	frame  []byte
	tunnel port.Tunnel
}

// runResult is what one chassis's datapath did with the packet.
type runResult struct {
	passes    []pass
	megaflows []dp.Megaflow
	outputs   []output
}

// run runs an in-memory datapath over m's rules with a channel port for
// every interface, sends frame in by port inNo (through the tunnel port
// with outer header t, if t is valid) and returns the translations, the
// megaflows installed and the frames sent once the packet is through.
func (m *model) run(ctx context.Context, inNo uint32, frame []byte, t port.Tunnel, timeout time.Duration) (*runResult, error) {
	if m.err != nil {
		return nil, m.err
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	rec := &recorder{Pipeline: m.pipe}
	ct := conntrack.New(conntrack.Config{})
	defer ct.Close()
	d, err := dp.New(dp.Config{Flows: rec, Conntrack: ct, IdleTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("trace: datapath: %w", err)
	}
	chans := map[uint32]*port.Channel{}
	names := map[uint32]string{}
	for name, no := range m.ports {
		c := port.NewChannel(name, 64, false)
		chans[no], names[no] = c, name
		if err := d.AddPort(no, c); err != nil {
			return nil, fmt.Errorf("trace: datapath: %w", err)
		}
	}
	if m.tunnel != 0 {
		c := port.NewTunnelChannel("geneve", 64)
		chans[m.tunnel], names[m.tunnel] = c, "(geneve tunnel)"
		if err := d.AddPort(m.tunnel, c); err != nil {
			return nil, fmt.Errorf("trace: datapath: %w", err)
		}
	}
	in := chans[inNo]
	if in == nil {
		return nil, fmt.Errorf("trace: %s has no interface %d", m.chassis, inNo)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if t.Valid() {
		err = in.InjectTunnel(frame, t)
	} else {
		err = in.Inject(frame, port.Offload{})
	}
	if err != nil {
		return nil, fmt.Errorf("trace: sending the packet: %w", err)
	}
	// The worker counts the packet under the lock it holds until the
	// packet and its recirculations are done and sent; Megaflows takes
	// that lock, so once the count shows, Megaflows sees the finished
	// result and the frames are in the ports' queues.
	deadline := time.Now().Add(timeout)
	for d.Stats().Packets == 0 {
		if time.Now().After(deadline) {
			return nil, errors.New("trace: the datapath did not take the packet in time")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	r := &runResult{megaflows: d.Megaflows()}
	rec.mu.Lock()
	r.passes = append([]pass(nil), rec.passes...)
	rec.mu.Unlock()
	nos := make([]uint32, 0, len(chans))
	for no := range chans {
		nos = append(nos, no)
	}
	sort.Slice(nos, func(i, j int) bool { return nos[i] < nos[j] })
	for _, no := range nos {
		for drained := false; !drained; {
			select {
			case p := <-chans[no].Out():
				o := output{no: no, name: names[no], frame: append([]byte(nil), p.Data...)}
				if no == m.tunnel {
					// Only the tunnel port adds the outer header (a
					// packet that came by the tunnel keeps the one it
					// arrived with wherever it goes).
					o.tunnel = p.Tunnel
					o.tunnel.Options = append([]byte(nil), p.Tunnel.Options...)
				}
				r.outputs = append(r.outputs, o)
			default:
				drained = true
			}
		}
	}
	return r, nil
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
