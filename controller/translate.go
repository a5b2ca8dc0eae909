package controller

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// Datapath tables of the physical stages (see the package documentation).
const (
	tablePhysToLog    = 0
	tableIngress      = 8
	tableLargeDetect  = 37
	tableLargeProcess = 38
	tableRemoteOutput = 39
	tableLocalOutput  = 40
	tableLoopback     = 41
	tableEgress       = 42
	tableSaveInport   = 64
	tableLogToPhys    = 65
)

// Input is everything the translation reads: a snapshot of the Southbound
// rows and of the chassis' local state.
type Input struct {
	// Chassis is this chassis' name (system-id) and ChassisUUID its
	// Chassis row (zero until registered).
	Chassis     string
	ChassisUUID ovsdb.UUID

	Datapaths   []sb.DatapathBinding
	Ports       []sb.PortBinding
	Flows       []sb.LogicalFlow
	DPGroups    []sb.LogicalDPGroup
	Multicast   []sb.MulticastGroup
	AddressSets []sb.AddressSet
	PortGroups  []sb.PortGroup
	AllChassis  []sb.Chassis
	Encaps      []sb.Encap

	// VIFs maps the iface-id of each local interface to its datapath
	// port number.
	VIFs map[string]uint32
	// Zones maps a logical port, or "dnat:"/"snat:" and a router
	// datapath's UUID, to its conntrack zone (Zones allocates them).
	Zones map[string]uint16
	// TunnelPort is the datapath port number of the Geneve port (0:
	// none, so ports on other chassis are unreachable).
	TunnelPort uint32
	// Hubs are the ports of each bridge other than the integration
	// bridge (the underlay's, say): a frame from one leaves by all the
	// others.
	Hubs [][]uint32
	// Physnets maps each provider network of ovn-bridge-mappings to the
	// ports of its bridge (which are in no hub): see localnet.go.
	Physnets map[string][]uint32

	// BFD says, by chassis name, whether this chassis' BFD session with
	// it is up (bfd.go); nil without BFD, and then a chassisredirect
	// port's gateway is its highest-priority chassis.
	BFD map[string]bool

	// Rows that gateway ports and the lookup tables read.
	HAChassisGroups   []sb.HAChassisGroup
	HAChassis         []sb.HAChassis
	GatewayChassis    []sb.GatewayChassis
	MACBindings       []sb.MACBinding
	StaticMACBindings []sb.StaticMACBinding
	FDBs              []sb.FDB
	LoadBalancers     []sb.LoadBalancer
}

// Output is what the translation decides.
type Output struct {
	Rules  []flow.Rule
	Groups []flow.GroupDef
	// Bind lists the Port_Bindings this chassis should hold (VIFs whose
	// interface is here), by logical port name.
	Bind map[string]ovsdb.UUID
	// Problems are the Southbound rows that could not be used, one line
	// each (the caller logs new ones once).
	Problems []string
}

// Translator compiles Inputs; it holds only immutable state (the
// compiler) and is safe for concurrent use.
type Translator struct {
	symtab   *lflow.Symtab
	compiler *lflow.Compiler
}

// NewTranslator returns a Translator with OVN's table layout.
func NewTranslator() (*Translator, error) {
	st, err := lflow.NewSymtab()
	if err != nil {
		return nil, fmt.Errorf("logical flow symbols: %w", err)
	}
	c, err := lflow.NewCompiler(st, lflow.DefaultLayout())
	if err != nil {
		return nil, fmt.Errorf("logical flow compiler: %w", err)
	}
	return &Translator{symtab: st, compiler: c}, nil
}

// translation is the per-call state of Translate.
type translation struct {
	t   *Translator
	in  *Input
	out *Output

	dps       map[ovsdb.UUID]*sb.DatapathBinding
	ports     map[ovsdb.UUID]*sb.PortBinding
	byName    map[string]*sb.PortBinding
	portKeys  map[ovsdb.UUID]map[string]uint32 // per datapath: ports and multicast groups
	local     map[ovsdb.UUID]bool              // local datapaths
	resident  map[string]bool                  // logical ports resident here
	remote    map[ovsdb.UUID]netip.Addr        // chassis UUID → encap IP
	addrSets  map[string][]lflow.Const
	badSets   map[string]bool
	portGroup map[string][]string

	localnet    map[ovsdb.UUID]*sb.PortBinding // per datapath: its plugged localnet port
	chassisName map[ovsdb.UUID]string
	haGroups    map[ovsdb.UUID]*sb.HAChassisGroup
	haChassis   map[ovsdb.UUID]*sb.HAChassis
	gwChassis   map[ovsdb.UUID]*sb.GatewayChassis

	// merged indexes the conjunction clause rules by table, priority and
	// match, so that two logical flows' clauses with one match become one
	// rule with both conjunction actions, as OVN's ofctrl merges them.
	merged map[string]int
	ids    *idSpace
	// parsed, if not nil, memoizes rule's parsing, and texts collects
	// the rules' texts (the Engine's).
	parsed map[string]flow.Rule
	texts  *[]string
	ctx    lflow.Context
	res    lflow.Result
}

// Translate computes the rules and bindings for in.
func (t *Translator) Translate(in *Input) *Output {
	tr := t.newTranslation(in)
	tr.index()
	tr.fixedRules()
	tr.physical()
	tr.lookups()
	tr.logical()
	return tr.out
}

// newTranslation returns the empty per-call state for in.
func (t *Translator) newTranslation(in *Input) *translation {
	return &translation{
		t: t, in: in, out: &Output{Bind: map[string]ovsdb.UUID{}},
		dps: map[ovsdb.UUID]*sb.DatapathBinding{}, ports: map[ovsdb.UUID]*sb.PortBinding{},
		byName: map[string]*sb.PortBinding{}, portKeys: map[ovsdb.UUID]map[string]uint32{},
		local: map[ovsdb.UUID]bool{}, resident: map[string]bool{}, remote: map[ovsdb.UUID]netip.Addr{},
		addrSets: map[string][]lflow.Const{}, badSets: map[string]bool{}, portGroup: map[string][]string{},
		merged:   map[string]int{},
		localnet: map[ovsdb.UUID]*sb.PortBinding{}, chassisName: map[ovsdb.UUID]string{},
		haGroups: map[ovsdb.UUID]*sb.HAChassisGroup{}, haChassis: map[ovsdb.UUID]*sb.HAChassis{},
		gwChassis: map[ovsdb.UUID]*sb.GatewayChassis{}, ids: newIDSpace(),
	}
}

func (tr *translation) problem(format string, args ...any) {
	tr.out.Problems = append(tr.out.Problems, fmt.Sprintf(format, args...))
}

// index builds the lookups and decides residency and local datapaths.
func (tr *translation) index() {
	in := tr.in
	for i := range in.Datapaths {
		d := &in.Datapaths[i]
		tr.dps[d.UUID] = d
		tr.portKeys[d.UUID] = map[string]uint32{}
	}
	for i := range in.AllChassis {
		tr.chassisName[in.AllChassis[i].UUID] = in.AllChassis[i].Name
	}
	for i := range in.HAChassisGroups {
		tr.haGroups[in.HAChassisGroups[i].UUID] = &in.HAChassisGroups[i]
	}
	for i := range in.HAChassis {
		tr.haChassis[in.HAChassis[i].UUID] = &in.HAChassis[i]
	}
	for i := range in.GatewayChassis {
		tr.gwChassis[in.GatewayChassis[i].UUID] = &in.GatewayChassis[i]
	}
	for i := range in.Ports {
		p := &in.Ports[i]
		tr.ports[p.UUID] = p
		tr.byName[p.LogicalPort] = p
		if keys := tr.portKeys[p.Datapath]; keys != nil {
			keys[p.LogicalPort] = uint32(p.TunnelKey)
		}
		if _, ok := in.VIFs[p.LogicalPort]; ok && isVIF(p) && tr.requestedHere(p) {
			tr.resident[p.LogicalPort] = true
			tr.local[p.Datapath] = true
			tr.out.Bind[p.LogicalPort] = p.UUID
		}
		if _, ok := in.VIFs[p.LogicalPort]; ok && p.Type == "localport" {
			tr.local[p.Datapath] = true
		}
	}
	tr.indexVirtualPorts()
	tr.indexGateways()
	tr.indexLocalnets()
	for i := range in.Multicast {
		m := &in.Multicast[i]
		if keys := tr.portKeys[m.Datapath]; keys != nil {
			keys[m.Name] = uint32(m.TunnelKey)
		}
	}
	// A datapath joined by a patch port to a local one is local too.
	for changed := true; changed; {
		changed = false
		for i := range in.Ports {
			p := &in.Ports[i]
			if !tr.isPatch(p) || !tr.local[p.Datapath] {
				continue
			}
			if peer := tr.byName[p.Options["peer"]]; peer != nil && !tr.local[peer.Datapath] {
				tr.local[peer.Datapath] = true
				changed = true
			}
		}
	}
	encaps := map[ovsdb.UUID]*sb.Encap{}
	for i := range in.Encaps {
		encaps[in.Encaps[i].UUID] = &in.Encaps[i]
	}
	for _, ch := range in.AllChassis {
		if ch.Name == in.Chassis {
			continue
		}
		var types []string
		for _, id := range ch.Encaps {
			e := encaps[id]
			if e != nil && e.Type != "geneve" {
				types = append(types, e.Type)
			}
			if e == nil || e.Type != "geneve" {
				continue
			}
			ip, err := netip.ParseAddr(e.IP)
			if err != nil {
				tr.problem("chassis %s: encap IP %q: %v", ch.Name, e.IP, err)
				continue
			}
			tr.remote[ch.UUID] = ip
			break
		}
		if _, ok := tr.remote[ch.UUID]; !ok && len(types) > 0 {
			tr.problem("chassis %s: encap types %v: only geneve is supported, its ports are unreachable", ch.Name, types)
		}
	}
	for _, as := range in.AddressSets {
		consts, err := tr.t.symtab.ParseAddresses(as.Addresses)
		if err != nil {
			tr.problem("address set %s: %v", as.Name, err)
			tr.badSets[as.Name] = true
			continue
		}
		tr.addrSets[as.Name] = consts
	}
	for _, pg := range in.PortGroups {
		tr.portGroup[pg.Name] = pg.Ports
	}
}

// isVIF reports whether p is a port that a local interface binds.
func isVIF(p *sb.PortBinding) bool {
	switch p.Type {
	case "", "virtual", "external":
		return true
	}
	return false
}

// rule parses one physical rule written in ovs-ofctl's syntax. The
// rules are built by this package, so a failure is a bug.
func (tr *translation) rule(format string, args ...any) {
	if err := tr.addRule(format, args...); err != nil {
		panic("controller: " + err.Error())
	}
}

// rowRule is rule for a rule made of a Southbound row's values (what
// names the row): one that does not parse is reported and left out.
func (tr *translation) rowRule(what, format string, args ...any) {
	if err := tr.addRule(format, args...); err != nil {
		tr.problem("%s: %v", what, err)
	}
}

func (tr *translation) addRule(format string, args ...any) error {
	s := fmt.Sprintf(format, args...)
	if tr.texts != nil {
		*tr.texts = append(*tr.texts, s)
	}
	if r, ok := tr.parsed[s]; ok {
		tr.out.Rules = append(tr.out.Rules, r)
		return nil
	}
	r, err := parseRule(s)
	if err != nil {
		return fmt.Errorf("physical rule %q: %w", s, err)
	}
	if tr.parsed != nil {
		tr.parsed[s] = r
	}
	tr.out.Rules = append(tr.out.Rules, r)
	return nil
}

// fixedRules are the stages' default rules.
func (tr *translation) fixedRules() {
	tr.rule("table=%d,priority=0 actions=resubmit(,%d)", tableLargeDetect, tableLargeProcess)
	tr.rule("table=%d,priority=0 actions=resubmit(,%d)", tableLargeProcess, tableRemoteOutput)
	tr.rule("table=%d,priority=0 actions=resubmit(,%d)", tableRemoteOutput, tableLocalOutput)
	var clear strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&clear, "set_field:0->reg%d,", i)
	}
	tr.rule("table=%d,priority=0 actions=%sresubmit(,%d)", tableLoopback, clear.String(), tableEgress)
	tr.rule("table=%d,priority=100,reg10=0x1/0x1 actions=push:NXM_OF_IN_PORT[],set_field:0->in_port,resubmit(,%d),pop:NXM_OF_IN_PORT[]", tableSaveInport, tableLogToPhys)
	tr.rule("table=%d,priority=0 actions=resubmit(,%d)", tableSaveInport, tableLogToPhys)
}

// zone is the conntrack zone of name (0 if none was allocated).
func (tr *translation) zone(name string) uint16 { return tr.in.Zones[name] }

// routerZones loads a router datapath's DNAT and SNAT zones.
func (tr *translation) routerZones(dp ovsdb.UUID) string {
	d := tr.dps[dp]
	if d == nil || !isRouter(d) {
		return ""
	}
	return fmt.Sprintf("set_field:%d->reg11,set_field:%d->reg12,", tr.zone("dnat:"+dp.String()), tr.zone("snat:"+dp.String()))
}

func isRouter(d *sb.DatapathBinding) bool {
	_, ok := d.ExternalIDs["logical-router"]
	return ok
}

// physical writes the rules of tables 0 and 39-65 for local datapaths.
func (tr *translation) physical() {
	in := tr.in
	ports := append([]sb.PortBinding(nil), in.Ports...)
	sort.Slice(ports, func(i, j int) bool { return ports[i].LogicalPort < ports[j].LogicalPort })
	for i := range ports {
		p := &ports[i]
		d := tr.dps[p.Datapath]
		if d == nil || !tr.local[p.Datapath] {
			continue
		}
		dk, pk := d.TunnelKey, p.TunnelKey
		switch {
		case p.Type == "localnet":
			tr.localnetPort(p, dk)
		case p.Type == "localport":
			tr.localPort(p, dk)
		case p.Type == "chassisredirect" && tr.resident[p.LogicalPort]:
			tr.redirectPort(p, dk)
		case tr.resident[p.LogicalPort] && tr.isVirtualHere(p):
			tr.virtualRules(p, dk, in.VIFs[*p.VirtualParent])
		case tr.resident[p.LogicalPort] && isVIF(p):
			tr.vifRules(p, dk, in.VIFs[p.LogicalPort])
		case tr.isPatch(p):
			peer := tr.byName[p.Options["peer"]]
			if peer == nil || tr.dps[peer.Datapath] == nil {
				tr.problem("patch port %s: no peer %q", p.LogicalPort, p.Options["peer"])
				continue
			}
			pd := tr.dps[peer.Datapath]
			tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=resubmit(,%d)",
				tableLocalOutput, dk, pk, tableLoopback)
			tr.rule("table=%d,priority=100,metadata=%d,reg10=0/0x1,reg14=%d,reg15=%d actions=drop",
				tableLoopback, dk, pk, pk)
			// The peer's ingress pipeline starts afresh: no conntrack
			// state, registers or flags of this datapath.
			var clear strings.Builder
			for r := 0; r <= 15; r++ {
				fmt.Fprintf(&clear, "set_field:0->reg%d,", r)
			}
			tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=clone(ct_clear,%s%sset_field:%d->metadata,set_field:%d->reg14,set_field:0->in_port,resubmit(,%d))",
				tableLogToPhys, dk, pk, clear.String(), tr.routerZones(peer.Datapath), pd.TunnelKey, peer.TunnelKey, tableIngress)
		case tr.localnet[p.Datapath] != nil && isVIF(p):
			tr.viaLocalnet(p, dk)
		case in.TunnelPort != 0:
			ch, ok := tr.remoteChassis(p)
			if !ok {
				continue
			}
			ip, ok := tr.remote[ch]
			if !ok {
				continue
			}
			tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=%s", tableRemoteOutput, dk, pk, tunnelOut(dk, ip, in.TunnelPort))
		}
	}
	if in.TunnelPort != 0 {
		dks := make([]int64, 0, len(tr.local))
		for id := range tr.local {
			if d := tr.dps[id]; d != nil {
				dks = append(dks, d.TunnelKey)
			}
		}
		sort.Slice(dks, func(i, j int) bool { return dks[i] < dks[j] })
		if in.BFD != nil {
			tr.bfdRule()
		}
		for _, dk := range dks {
			tr.rule("table=%d,priority=100,in_port=%d,tun_id=%d actions=set_field:%d->metadata,move:tun_metadata0[16..30]->reg14[0..14],move:tun_metadata0[0..15]->reg15[0..15],resubmit(,%d)",
				tablePhysToLog, in.TunnelPort, dk, dk, tableLocalOutput)
		}
	}
	tr.multicast()
	tr.physnetBridges()
	for _, hub := range in.Hubs {
		for _, from := range hub {
			var acts []string
			for _, to := range hub {
				if to != from {
					acts = append(acts, fmt.Sprintf("output:%d", to))
				}
			}
			if len(acts) == 0 {
				acts = []string{"drop"}
			}
			tr.rule("table=%d,priority=100,in_port=%d actions=%s", tablePhysToLog, from, strings.Join(acts, ","))
		}
	}
}

// tunnelOut sends the packet to the chassis at ip over the tunnel port.
func tunnelOut(dk int64, ip netip.Addr, tunnel uint32) string {
	return fmt.Sprintf("set_field:%d->tun_id,set_field:%s->tun_dst,move:reg14[0..14]->tun_metadata0[16..30],move:reg15[0..15]->tun_metadata0[0..15],output:%d",
		dk, ip, tunnel)
}

// multicast writes each local datapath's multicast groups: the egress
// pipeline once for every local member, and one copy to each chassis
// with remote members.
func (tr *translation) multicast() {
	in := tr.in
	groups := append([]sb.MulticastGroup(nil), in.Multicast...)
	sort.Slice(groups, func(i, j int) bool {
		return groups[i].TunnelKey < groups[j].TunnelKey || groups[i].TunnelKey == groups[j].TunnelKey && groups[i].Datapath.String() < groups[j].Datapath.String()
	})
	for _, g := range groups {
		d := tr.dps[g.Datapath]
		if d == nil || !tr.local[g.Datapath] {
			continue
		}
		dk, mk := d.TunnelKey, g.TunnelKey
		var local, remote strings.Builder
		remoteSeen := map[ovsdb.UUID]bool{}
		members := make([]*sb.PortBinding, 0, len(g.Ports))
		for _, id := range g.Ports {
			if p := tr.ports[id]; p != nil {
				members = append(members, p)
			}
		}
		sort.Slice(members, func(i, j int) bool { return members[i].TunnelKey < members[j].TunnelKey })
		for _, p := range members {
			_, vifHere := in.VIFs[p.LogicalPort]
			switch {
			case tr.resident[p.LogicalPort] && isVIF(p), p.Type == "localport" && vifHere, tr.isLocalnet(p):
				fmt.Fprintf(&local, "set_field:%d->reg15,set_field:%d->reg13,resubmit(,%d),", p.TunnelKey, tr.zone(p.LogicalPort), tableLoopback)
			case tr.isPatch(p):
				fmt.Fprintf(&local, "set_field:%d->reg15,resubmit(,%d),", p.TunnelKey, tableLoopback)
			case tr.localnet[g.Datapath] != nil:
				// Remote members are reached through the localnet port.
			case p.Chassis != nil && *p.Chassis != in.ChassisUUID && in.TunnelPort != 0 && !remoteSeen[*p.Chassis]:
				if ip, ok := tr.remote[*p.Chassis]; ok {
					remoteSeen[*p.Chassis] = true
					fmt.Fprintf(&remote, "clone(%s),", tunnelOut(dk, ip, in.TunnelPort))
				}
			}
		}
		if local.Len() > 0 {
			tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=%sset_field:%d->reg15",
				tableLocalOutput, dk, mk, local.String(), mk)
		}
		if remote.Len() > 0 {
			tr.rule("table=%d,priority=100,metadata=%d,reg15=%d actions=%sresubmit(,%d)",
				tableRemoteOutput, dk, mk, remote.String(), tableLocalOutput)
		}
	}
}

// logical compiles the logical flows of the local datapaths.
func (tr *translation) logical() {
	in := tr.in
	groups := map[ovsdb.UUID][]ovsdb.UUID{}
	for _, g := range in.DPGroups {
		groups[g.UUID] = g.Datapaths
	}
	flows := append([]sb.LogicalFlow(nil), in.Flows...)
	sort.Slice(flows, func(i, j int) bool { return flows[i].UUID.String() < flows[j].UUID.String() })
	for i := range flows {
		lf := &flows[i]
		var dps []ovsdb.UUID
		if lf.LogicalDatapath != nil {
			dps = []ovsdb.UUID{*lf.LogicalDatapath}
		} else if lf.LogicalDPGroup != nil {
			dps = groups[*lf.LogicalDPGroup]
		}
		for _, dp := range dps {
			if tr.local[dp] {
				tr.compile(lf, tr.dps[dp])
			}
		}
	}
}

// compile adds the rules of one logical flow on one datapath.
func (tr *translation) compile(lf *sb.LogicalFlow, d *sb.DatapathBinding) {
	if d == nil {
		return
	}
	if err := tr.t.compileFlow(lf, d, &dpEnv{tr: tr, dp: d}, tr.ids, &tr.ctx, &tr.res); err != nil {
		tr.problem("%v", err)
		return
	}
	for _, r := range tr.res.Rules {
		if r.IsConjunctive() {
			key := ruleKey(&r)
			if at, ok := tr.merged[key]; ok {
				tr.out.Rules[at].Actions = append(tr.out.Rules[at].Actions, r.Actions...)
				continue
			}
			tr.merged[key] = len(tr.out.Rules)
		}
		tr.out.Rules = append(tr.out.Rules, r)
	}
	tr.out.Groups = append(tr.out.Groups, tr.res.Groups...)
}

// compileFlow compiles lf on d into res, with the conjunction and group
// ids that ids gives the pair; the rules' actions are res's own copies.
// It is the one compilation that Translate and the Engine share.
func (t *Translator) compileFlow(lf *sb.LogicalFlow, d *sb.DatapathBinding, env lflow.Env, ids *idSpace, ctx *lflow.Context, res *lflow.Result) error {
	key := flowKey{flow: lf.UUID, dp: d.UUID}
	ids.release(key)
	ctx.Env = env
	ctx.Datapath = uint32(d.TunnelKey)
	ctx.Router = isRouter(d)
	ctx.Cookie = cookieOf(lf.UUID)
	l := lflow.Lflow{Pipeline: lf.Pipeline, Table: int(lf.TableID), Priority: int(lf.Priority), Match: lf.Match, Actions: lf.Actions}
	conj, group := ids.preferred(key)
	for attempt := 0; ; attempt++ {
		ctx.NextConjID, ctx.NextGroupID = conj, group
		res.Rules, res.Groups = res.Rules[:0], res.Groups[:0]
		if err := t.compiler.Compile(&l, ctx, res); err != nil {
			return fmt.Errorf("logical flow %s (%s table %d priority %d, %q): %w", lf.UUID, lf.Pipeline, lf.TableID, lf.Priority, lf.Match, err)
		}
		nConj, nGroup := ctx.NextConjID-conj, ctx.NextGroupID-group
		if ids.claim(key, conj, nConj, group, nGroup) {
			break
		}
		// Another flow holds some of these ids: compile again on free
		// ones (the ids a flow takes depend only on where they start).
		conj, group = ids.free(conj, nConj, idsConj), ids.free(group, nGroup, idsGroup)
	}
	for i := range res.Rules {
		res.Rules[i].Actions = append([]flow.Action(nil), res.Rules[i].Actions...)
	}
	return nil
}

// flowKey names one logical flow compiled on one datapath: the unit the
// Engine caches.
type flowKey struct{ flow, dp ovsdb.UUID }

// Which of idSpace's two id kinds.
const (
	idsConj = iota
	idsGroup
)

// idSpace hands out the conjunction and group ids of compiled logical
// flows. A flow on a datapath starts its ids where a hash of the pair
// says, so that they do not depend on which other flows exist or in
// which order they were compiled: a full and an incremental compute
// agree, and recompiling one flow does not renumber the others' rules.
type idSpace struct {
	owner  [2]map[uint32]flowKey
	blocks map[flowKey][2]idBlock
}

type idBlock struct{ start, n uint32 }

// idRange bounds the ids handed out, well inside OpenFlow's group ids.
const idRange = 1 << 30

func newIDSpace() *idSpace {
	return &idSpace{owner: [2]map[uint32]flowKey{{}, {}}, blocks: map[flowKey][2]idBlock{}}
}

// preferred is where key's conjunction and group ids start unless taken.
func (s *idSpace) preferred(key flowKey) (conj, group uint32) {
	h := fnv.New64a()
	f, d := key.flow.Bytes(), key.dp.Bytes()
	h.Write(f[:])
	h.Write(d[:])
	v := h.Sum64()
	return 1 + uint32(v%idRange), 1 + uint32((v>>32)%idRange)
}

// claim gives key the ids [conj, conj+nConj) and [group, group+nGroup)
// if no other key holds any of them.
func (s *idSpace) claim(key flowKey, conj, nConj, group, nGroup uint32) bool {
	want := [2]idBlock{{conj, nConj}, {group, nGroup}}
	for k, b := range want {
		for id := b.start; id < b.start+b.n; id++ {
			if _, taken := s.owner[k][id]; taken {
				return false
			}
		}
	}
	for k, b := range want {
		for id := b.start; id < b.start+b.n; id++ {
			s.owner[k][id] = key
		}
	}
	s.blocks[key] = want
	return true
}

// free returns the first start at or after from (wrapping) of n free
// ids of kind k.
func (s *idSpace) free(from, n uint32, k int) uint32 {
	for start := from; ; start++ {
		if start+n > idRange {
			start = 1
		}
		ok := true
		for id := start; id < start+n && ok; id++ {
			_, taken := s.owner[k][id]
			ok = !taken
		}
		if ok {
			return start
		}
	}
}

// release frees key's ids.
func (s *idSpace) release(key flowKey) {
	b, ok := s.blocks[key]
	if !ok {
		return
	}
	for k := range b {
		for id := b[k].start; id < b[k].start+b[k].n; id++ {
			delete(s.owner[k], id)
		}
	}
	delete(s.blocks, key)
}

// cookieOf is the first 32 bits of a logical flow's UUID, as OVN puts in
// its rules' cookies.
func cookieOf(id ovsdb.UUID) uint64 {
	v, _ := strconv.ParseUint(id.String()[:8], 16, 32)
	return v
}

// dpEnv is lflow.Env (and LocalPorts) for one datapath.
type dpEnv struct {
	tr *translation
	dp *sb.DatapathBinding
}

func (e *dpEnv) AddressSet(name string) ([]lflow.Const, bool) {
	c, ok := e.tr.addrSets[name]
	return c, ok
}

// PortGroup finds the datapath's own copy first: ovn-northd 23.03
// writes a port group once per switch, named KEY_NAME.
func (e *dpEnv) PortGroup(name string) ([]string, bool) {
	if ports, ok := e.tr.portGroup[fmt.Sprintf("%d_%s", e.dp.TunnelKey, name)]; ok {
		return ports, true
	}
	ports, ok := e.tr.portGroup[name]
	return ports, ok
}

func (e *dpEnv) PortKey(name string) (uint32, bool) {
	k, ok := e.tr.portKeys[e.dp.UUID][name]
	return k, ok
}

func (e *dpEnv) ChassisResident(port string) bool { return e.tr.resident[port] }

// IsLocalPort: a VIF is local where it is bound; other kinds of ports
// (patch, localnet, localport) are everywhere their datapath is.
func (e *dpEnv) IsLocalPort(name string) bool {
	p := e.tr.byName[name]
	if p == nil {
		return false
	}
	if isVIF(p) || p.Type == "l3gateway" || p.Type == "chassisredirect" {
		return e.tr.resident[name]
	}
	return true
}
