package pinctrl

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/lflow"
)

// Engine is pinctrl's pure core: it turns one packet-in and the
// Southbound state into the packets to send and the Southbound rows to
// write. It does no I/O and is safe for concurrent use.
type Engine struct {
	symtab   *lflow.Symtab
	compiler *lflow.Compiler
	layout   lflow.Layout
	// now stamps MAC bindings; tests fix it.
	now func() time.Time

	// Parsing the userdata and compiling a nested body cost far more
	// than building the packet; both depend only on the flow (and, for
	// a body, the state it names ports from), so they are cached.
	mu       sync.Mutex
	parsed   map[string][]lflow.Action
	compiled map[bodyKey][]flow.Action
}

// bodyKey names a nested action's compiled body.
type bodyKey struct {
	userdata string
	table    uint8
	dp       *Datapath // of one State: a new State compiles anew
}

// maxCached bounds each cache; a full cache starts over.
const maxCached = 4096

// NewEngine returns an engine for OVN's symbols and table layout.
func NewEngine() (*Engine, error) {
	st, err := lflow.NewSymtab()
	if err != nil {
		return nil, err
	}
	layout := lflow.DefaultLayout()
	c, err := lflow.NewCompiler(st, layout)
	if err != nil {
		return nil, err
	}
	return &Engine{symtab: st, compiler: c, layout: layout, now: time.Now,
		parsed: map[string][]lflow.Action{}, compiled: map[bodyKey][]flow.Action{}}, nil
}

// Output is what handling one packet-in produced.
type Output struct {
	Packets     []dp.PacketOut
	MACBindings []MACBinding
	FDBs        []FDBEntry
	SvcReplies  []SvcReply // for the service monitors' prober
	IGMP        []IGMPReport
	VPorts      []VPortBinding    // bind_vport's
	Events      []ControllerEvent // trigger_event's
}

// MACBinding is a neighbor learned by put_arp or put_nd: a MAC_Binding
// row to write.
type MACBinding struct {
	Datapath *Datapath
	BindingKey
	MAC       net.HardwareAddr
	Timestamp int64 // ms since the epoch
}

// Kind returns the name of the action in a controller action's userdata
// ("put_dhcp_opts", "arp", ...), cheaply, for rate limiting before the
// userdata is parsed.
func Kind(userdata []byte) string {
	s := string(userdata)
	if i := strings.Index(s, " = "); i >= 0 && i < strings.IndexAny(s+"({", "({") {
		s = s[i+3:]
	}
	if i := strings.IndexAny(s, "({; "); i >= 0 {
		s = s[:i]
	}
	return s
}

// Handle answers one packet-in. An error says why the packet was not
// answered (bad packet, unknown action or datapath); a paused pipeline is
// resumed even then, with the action's result 0, when it can be.
func (e *Engine) Handle(pi *dp.PacketIn, st *State) (Output, error) {
	acts, err := e.parse(string(pi.UserData))
	if err != nil {
		return Output{}, fmt.Errorf("controller action %q: %w", pi.UserData, err)
	}
	if len(acts) != 1 {
		return Output{}, fmt.Errorf("controller action %q: want one action", pi.UserData)
	}
	h := &handling{e: e, pi: pi, st: st, dp: st.Datapaths[uint32(pi.Key.Get(flow.Metadata))]}
	if h.dp == nil {
		return Output{}, fmt.Errorf("packet-in from unknown datapath %d", pi.Key.Get(flow.Metadata))
	}
	f, ferr := parseFrame(pi.Frame)
	h.f = f
	switch a := acts[0].(type) {
	case *lflow.NestedAction:
		if ferr != nil {
			return Output{}, fmt.Errorf("%s: %w", a.Name, ferr)
		}
		err = h.nested(a)
	case *lflow.CallAction:
		if a.Result != nil {
			err = h.paused(a, ferr)
		} else {
			err = h.call(a)
		}
	default:
		err = fmt.Errorf("controller action %q is not for pinctrl", pi.UserData)
	}
	return h.out, err
}

// parse parses a controller action's userdata, from the cache if it can.
func (e *Engine) parse(ud string) ([]lflow.Action, error) {
	e.mu.Lock()
	acts, ok := e.parsed[ud]
	e.mu.Unlock()
	if ok {
		return acts, nil
	}
	acts, err := e.symtab.ParseActions(ud)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.parsed) >= maxCached {
		clear(e.parsed)
	}
	e.parsed[ud] = acts
	e.mu.Unlock()
	return acts, nil
}

// handling is the state of one Handle call.
type handling struct {
	e   *Engine
	pi  *dp.PacketIn
	st  *State
	dp  *Datapath
	f   *frame
	out Output
}

// nested builds the packet a nested action starts from and sends it
// through the action's body from the pipeline position of the action.
func (h *handling) nested(a *lflow.NestedAction) error {
	var pkt []byte
	var err error
	body, ovn := splitOVNFields(a.Body)
	switch a.Name {
	case "arp":
		pkt, err = arpRequest(h.f)
	case "nd_ns":
		pkt, err = neighborSolicitation(h.f)
	case "nd_na", "nd_na_router":
		pkt, err = neighborAdvertisement(h.f, a.Name == "nd_na_router")
	case "icmp4", "icmp4_error":
		pkt, err = icmp4Error(h.f, 3, 1, ovn["icmp4.frag_mtu"])
	case "icmp6", "icmp6_error":
		pkt, err = icmp6Error(h.f, 1, 1, ovn["icmp6.frag_mtu"])
	case "tcp_reset":
		pkt, err = tcpReset(h.f, false)
	case "reject":
		pkt, err = reject(h.f)
	case "sctp_abort":
		pkt, err = sctpAbort(h.f, false)
	default:
		return fmt.Errorf("nested action %s is not supported", a.Name)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", a.Name, err)
	}
	key := bodyKey{string(h.pi.UserData), h.pi.Table, h.dp}
	h.e.mu.Lock()
	prog, ok := h.e.compiled[key]
	h.e.mu.Unlock()
	if !ok {
		if prog, err = h.compile(body); err != nil {
			return fmt.Errorf("%s: %w", a.Name, err)
		}
		h.e.mu.Lock()
		if len(h.e.compiled) >= maxCached {
			clear(h.e.compiled)
		}
		h.e.compiled[key] = prog
		h.e.mu.Unlock()
	}
	// The new packet comes from the controller, as an OpenFlow
	// packet-out's does: not from the port the packet-in came in on, so
	// that a reply output to that port (reject's) is not dropped as
	// output to the input port.
	md := h.pi.Key
	md.Set(flow.InPort, uint64(controllerPort))
	h.out.Packets = append(h.out.Packets, dp.PacketOut{Frame: pkt, Key: md, Table: h.pi.Table, Actions: prog})
	return nil
}

// controllerPort is the in_port of the packets nested actions build:
// OpenFlow's OFPP_CONTROLLER, the port of no interface.
const controllerPort = 0xfffffffd

// splitOVNFields takes out of body the assignments to fields the
// controller sets itself (icmp4.frag_mtu), returning the rest and those
// values.
func splitOVNFields(body []lflow.Action) ([]lflow.Action, map[string]uint64) {
	ovn := map[string]uint64{}
	var rest []lflow.Action
	for _, b := range body {
		if as, ok := b.(*lflow.AssignAction); ok && as.Dst.Sym.OVNField && as.Src == nil {
			ovn[as.Dst.Sym.Name] = as.Value.Value.Lo
			continue
		}
		rest = append(rest, b)
	}
	return rest, ovn
}

// compile turns a nested action's body into datapath actions, in the
// logical pipeline and table of the rule whose action it is.
func (h *handling) compile(body []lflow.Action) ([]flow.Action, error) {
	pipeline, table, err := h.e.logicalTable(h.pi.Table)
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return []flow.Action{}, nil
	}
	lf := lflow.Lflow{Pipeline: pipeline, Table: table, Match: "1", Actions: lflow.ActionsString(body)}
	ctx := lflow.Context{Env: env{h.dp}, Datapath: h.dp.Key, Router: h.dp.Router}
	var res lflow.Result
	if err := h.e.compiler.Compile(&lf, &ctx, &res); err != nil {
		return nil, err
	}
	if len(res.Rules) == 0 {
		return nil, errors.New("nested actions compile to no rule")
	}
	return res.Rules[0].Actions, nil
}

// logicalTable maps a datapath table back to its logical pipeline and
// table.
func (e *Engine) logicalTable(t uint8) (string, int, error) {
	switch {
	case t >= e.layout.IngressBase && t < e.layout.IngressOutput:
		return "ingress", int(t - e.layout.IngressBase), nil
	case t >= e.layout.EgressBase && t < e.layout.EgressOutput:
		return "egress", int(t - e.layout.EgressBase), nil
	}
	return "", 0, fmt.Errorf("table %d is in no logical pipeline", t)
}

// call runs an action without a result: put_arp, put_nd, put_fdb.
func (h *handling) call(a *lflow.CallAction) error {
	switch a.Name {
	case "igmp":
		return h.igmp()
	case "bind_vport":
		return h.bindVport(a)
	case "trigger_event":
		return h.triggerEvent(a)
	case "put_fdb":
		if len(a.Args) != 2 {
			return errors.New("put_fdb: want 2 arguments")
		}
		port, err := h.field(a.Args[0].Value)
		if err != nil {
			return err
		}
		mac, err := h.field(a.Args[1].Value)
		if err != nil {
			return err
		}
		return h.putFDB(port, mac)
	case "handle_svc_check":
		if len(a.Args) != 1 {
			return errors.New("handle_svc_check: want 1 argument")
		}
		port, err := h.field(a.Args[0].Value)
		if err != nil {
			return err
		}
		return h.handleSvcCheck(port)
	case "put_arp", "put_nd":
		if len(a.Args) != 3 {
			return fmt.Errorf("%s: want 3 arguments", a.Name)
		}
		port, err := h.field(a.Args[0].Value)
		if err != nil {
			return err
		}
		ip, err := h.field(a.Args[1].Value)
		if err != nil {
			return err
		}
		mac, err := h.field(a.Args[2].Value)
		if err != nil {
			return err
		}
		name, ok := h.dp.PortNames[uint32(port.Lo)]
		if !ok {
			return fmt.Errorf("%s: unknown logical port %d", a.Name, port.Lo)
		}
		var addr netip.Addr
		if a.Name == "put_arp" {
			addr = netip.AddrFrom4([4]byte{byte(ip.Lo >> 24), byte(ip.Lo >> 16), byte(ip.Lo >> 8), byte(ip.Lo)})
		} else {
			addr = u128Addr(ip)
		}
		m := net.HardwareAddr{byte(mac.Lo >> 40), byte(mac.Lo >> 32), byte(mac.Lo >> 24), byte(mac.Lo >> 16), byte(mac.Lo >> 8), byte(mac.Lo)}
		h.out.MACBindings = append(h.out.MACBindings, MACBinding{Datapath: h.dp,
			BindingKey: BindingKey{LogicalPort: name, IP: addr}, MAC: m, Timestamp: h.e.now().UnixMilli()})
		return nil
	}
	return fmt.Errorf("action %s is not supported by pinctrl yet", a.Name)
}

func u128Addr(v flow.U128) netip.Addr {
	var b [16]byte
	for i := range 8 {
		b[i] = byte(v.Hi >> (56 - 8*i))
		b[8+i] = byte(v.Lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}

// field reads a field argument (inport, arp.spa, reg0[0..47]) from the
// packet-in's key.
func (h *handling) field(toks []lflow.ArgToken) (flow.U128, error) {
	if len(toks) == 0 || toks[0].Kind != lflow.TokIdent {
		return flow.U128{}, errors.New("argument is not a field")
	}
	s := h.e.symtab.Lookup(toks[0].Text)
	if s == nil || s.Field == nil {
		return flow.U128{}, fmt.Errorf("argument %s is not a field", toks[0].Text)
	}
	r := flow.FieldRange{}
	ok := false
	if r.Field, ok = flow.FieldByName(s.Field.DP); !ok {
		return flow.U128{}, fmt.Errorf("field %s has no datapath field", s.Name)
	}
	r.Ofs = uint(s.Field.DPOfs + s.Ofs)
	width := s.Width
	if width == 0 { // a string field (inport): the whole register
		width = int(r.Field.Bits()) - int(r.Ofs)
	}
	if len(toks) >= 3 && toks[1].Kind == lflow.TokLSquare {
		lo := int(toks[2].Value.Lo)
		hi := lo
		if len(toks) >= 5 && toks[3].Kind == lflow.TokEllipsis {
			hi = int(toks[4].Value.Lo)
		}
		if hi < lo || hi >= width {
			return flow.U128{}, fmt.Errorf("bad subfield of %s", s.Name)
		}
		r.Ofs += uint(lo)
		width = hi - lo + 1
	}
	r.Bits = uint(width)
	return h.pi.Key.GetRange(r), nil
}

// paused runs an action with a result and resumes the pipeline with it.
// A packet the action does not apply to resumes unchanged with result 0.
func (h *handling) paused(a *lflow.CallAction, ferr error) error {
	var reply []byte
	var err error
	if ferr != nil {
		err = ferr
	} else {
		switch a.Name {
		case "put_dhcp_opts":
			reply, err = h.putDHCPOpts(a)
		case "put_dhcpv6_opts":
			reply, err = h.putDHCPv6Opts(a)
		case "dns_lookup":
			reply, err = h.dnsLookup()
		case "put_nd_ra_opts":
			reply, err = h.putNDRAOpts(a)
		default:
			err = fmt.Errorf("action %s is not supported by pinctrl yet", a.Name)
		}
	}
	if h.pi.Cont == nil {
		return errors.Join(err, fmt.Errorf("%s: packet-in without continuation", a.Name))
	}
	k := h.pi.Key
	result := uint64(0)
	frame := h.pi.Frame
	if err == nil && reply != nil {
		result, frame = 1, reply
	}
	if rerr := h.setResult(&k, a.Result, result); rerr != nil {
		return rerr
	}
	h.out.Packets = append(h.out.Packets, h.pi.Resume(frame, k))
	if errors.Is(err, errNotApplicable) {
		return nil
	}
	return err
}

// errNotApplicable: the action leaves this packet alone (a DHCPRELEASE,
// a DNS query for a name not in the table); the result is 0.
var errNotApplicable = errors.New("not applicable")

// setResult stores v into the action's result field.
func (h *handling) setResult(k *flow.Key, r *lflow.FieldRef, v uint64) error {
	base := r.Sym.Field
	f, ok := flow.FieldByName(base.DP)
	if !ok {
		return fmt.Errorf("result %s has no datapath field", r.Sym.Name)
	}
	k.SetRange(flow.FieldRange{Field: f, Ofs: uint(base.DPOfs + r.BaseOfs()), Bits: uint(r.Width())}, flow.U128{Lo: v})
	return nil
}
