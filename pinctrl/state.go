package pinctrl

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/govn/govn/lflow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// State is what pinctrl needs of the Southbound to answer packets: the
// logical datapaths by tunnel key, with their ports and DNS records, and
// the MAC bindings already there. It is built once per Southbound change
// and then only read.
type State struct {
	Datapaths   map[uint32]*Datapath  // by tunnel key
	MACBindings map[BindingKey]string // the MAC of each existing MAC_Binding row
	FDB         map[FDBKey]uint32     // the port of each existing FDB row
	// RAPorts are the router ports that send periodic router
	// advertisements onto a switch with a port bound here.
	RAPorts []RAPort
	// Announcements are the addresses this chassis announces with
	// gratuitous ARPs on localnet ports (Port_Binding nat_addresses).
	Announcements []Announcement
	// ServiceMonitors are the Service_Monitor rows of ports bound here.
	ServiceMonitors []ServiceMonitor
	// Mcast is the IP_Multicast configuration of each snooping switch.
	Mcast map[uint32]McastConfig
	// VPorts are the virtual ports (Port_Bindings of type virtual), by
	// name.
	VPorts map[string]VPort
	// Events are the Controller_Event rows of this chassis, by
	// ControllerEvent.Key.
	Events map[string]bool
}

// Announcement is one nat_addresses entry resident here: a MAC and its
// IPv4 addresses, to announce on the localnet ports of Switch.
type Announcement struct {
	Port     string // the Port_Binding whose nat_addresses it is
	Switch   uint32
	Localnet []uint32 // the switch's localnet ports' tunnel keys
	MAC      net.HardwareAddr
	IPs      []netip.Addr
}

// Key names an announcement's contents: a change starts it over.
func (a Announcement) Key() string {
	return fmt.Sprintf("%s/%s/%v/%v", a.Port, a.MAC, a.IPs, a.Localnet)
}

// RAPort is a router port with ipv6_ra_send_periodic: its options
// (ipv6_ra_*, from the router port's ipv6_ra_configs) and where its
// advertisements enter: the peer switch port.
type RAPort struct {
	Name    string
	Switch  uint32 // the switch datapath's tunnel key
	PeerKey uint32 // the switch's router-type port to the router
	Options map[string]string
}

// Datapath is one logical switch or router.
type Datapath struct {
	UUID      ovsdb.UUID
	Key       uint32
	Router    bool
	Ports     map[string]uint32 // logical port (or multicast group) name to tunnel key
	PortNames map[uint32]string
	// DNS maps a lower-case name to the value of its record: addresses
	// ("10.0.0.5 aef0::5") or, for a reverse name, a host name.
	DNS map[string]string
}

// BindingKey names a MAC_Binding row: OVN keeps one per logical port and
// IP address.
type BindingKey struct {
	LogicalPort string
	IP          netip.Addr
}

// NewState reads the Southbound cache c for chassis (its name).
func NewState(c *client.Cache, chassis string) *State {
	st := &State{Datapaths: map[uint32]*Datapath{}, MACBindings: map[BindingKey]string{}, FDB: map[FDBKey]uint32{},
		VPorts: map[string]VPort{}, Events: map[string]bool{}}
	for _, f := range client.List[sb.FDB](c) {
		st.FDB[FDBKey{uint32(f.DPKey), strings.ToLower(f.MAC)}] = uint32(f.PortKey)
	}
	byUUID := map[ovsdb.UUID]*Datapath{}
	for _, d := range client.List[sb.DatapathBinding](c) {
		_, router := d.ExternalIDs["logical-router"]
		dp := &Datapath{UUID: d.UUID, Key: uint32(d.TunnelKey), Router: router,
			Ports: map[string]uint32{}, PortNames: map[uint32]string{}, DNS: map[string]string{}}
		st.Datapaths[dp.Key] = dp
		byUUID[d.UUID] = dp
	}
	var me ovsdb.UUID
	for _, ch := range client.List[sb.Chassis](c) {
		if ch.Name == chassis {
			me = ch.UUID
		}
	}
	ports := client.List[sb.PortBinding](c)
	byName := map[string]*sb.PortBinding{}
	local := map[ovsdb.UUID]bool{} // datapaths with a port bound here
	for i, p := range ports {
		byName[p.LogicalPort] = &ports[i]
		if p.Chassis != nil && *p.Chassis == me && me != (ovsdb.UUID{}) {
			local[p.Datapath] = true
		}
		if dp := byUUID[p.Datapath]; dp != nil {
			dp.Ports[p.LogicalPort] = uint32(p.TunnelKey)
			dp.PortNames[uint32(p.TunnelKey)] = p.LogicalPort
			if p.Type == "virtual" {
				v := VPort{Datapath: dp.Key, Here: p.Chassis != nil && *p.Chassis == me && me != (ovsdb.UUID{})}
				if p.VirtualParent != nil {
					v.Parent = *p.VirtualParent
				}
				st.VPorts[p.LogicalPort] = v
			}
		}
	}
	st.Mcast = mcastConfigs(c, byUUID, local)
	for _, p := range ports {
		if p.Options["ipv6_ra_send_periodic"] != "true" {
			continue
		}
		peer := byName[p.Options["peer"]]
		if peer == nil || !local[peer.Datapath] || byUUID[peer.Datapath] == nil {
			continue
		}
		st.RAPorts = append(st.RAPorts, RAPort{Name: p.LogicalPort, Switch: byUUID[peer.Datapath].Key,
			PeerKey: uint32(peer.TunnelKey), Options: p.Options})
	}
	sort.Slice(st.RAPorts, func(i, j int) bool { return st.RAPorts[i].Name < st.RAPorts[j].Name })
	st.ServiceMonitors = localServiceMonitors(client.List[sb.ServiceMonitor](c), me, byName, byUUID)
	localnets := map[ovsdb.UUID][]uint32{}
	for _, p := range ports {
		if p.Type == "localnet" {
			localnets[p.Datapath] = append(localnets[p.Datapath], uint32(p.TunnelKey))
		}
	}
	resident := func(p *sb.PortBinding) bool {
		return p != nil && (p.Chassis != nil && *p.Chassis == me && me != (ovsdb.UUID{}) ||
			chassis != "" && p.Options["l3gateway-chassis"] == chassis)
	}
	for i := range ports {
		p := &ports[i]
		dp := byUUID[p.Datapath]
		if len(p.NATAddresses) == 0 || dp == nil || len(localnets[p.Datapath]) == 0 {
			continue
		}
		for _, entry := range p.NATAddresses {
			a, where, err := parseNATAddresses(entry)
			if err != nil {
				continue
			}
			owner := p
			if where != "" {
				owner = byName[where]
			}
			if !resident(owner) {
				continue
			}
			a.Port, a.Switch, a.Localnet = p.LogicalPort, dp.Key, localnets[p.Datapath]
			st.Announcements = append(st.Announcements, a)
		}
	}
	sort.Slice(st.Announcements, func(i, j int) bool { return st.Announcements[i].Key() < st.Announcements[j].Key() })
	for _, m := range client.List[sb.MulticastGroup](c) {
		if dp := byUUID[m.Datapath]; dp != nil {
			dp.Ports[m.Name] = uint32(m.TunnelKey)
		}
	}
	for _, d := range client.List[sb.DNS](c) {
		for _, id := range d.Datapaths {
			if dp := byUUID[id]; dp != nil {
				for name, v := range d.Records {
					dp.DNS[strings.ToLower(name)] = v
				}
			}
		}
	}
	for _, e := range client.List[sb.ControllerEvent](c) {
		if e.Chassis != nil && *e.Chassis == me && me != (ovsdb.UUID{}) {
			st.Events[eventKey(e.EventType, e.EventInfo)] = true
		}
	}
	for _, m := range client.List[sb.MACBinding](c) {
		if ip, err := netip.ParseAddr(m.IP); err == nil {
			st.MACBindings[BindingKey{m.LogicalPort, ip}] = m.MAC
		}
	}
	return st
}

// env is lflow.Env for compiling the actions nested in a controller
// action on dp: only port names can occur in them.
type env struct{ dp *Datapath }

func (e env) AddressSet(string) ([]lflow.Const, bool) { return nil, false }
func (e env) PortGroup(string) ([]string, bool)       { return nil, false }
func (e env) ChassisResident(string) bool             { return false }
func (e env) PortKey(name string) (uint32, bool) {
	k, ok := e.dp.Ports[name]
	return k, ok
}

// parseNATAddresses reads one nat_addresses entry: "MAC IP...
// [is_chassis_resident("PORT")]"; it returns PORT too ("" if none).
func parseNATAddresses(s string) (Announcement, string, error) {
	var a Announcement
	where := ""
	if i := strings.Index(s, "is_chassis_resident("); i >= 0 {
		rest := strings.TrimSpace(s[i+len("is_chassis_resident("):])
		rest, ok := strings.CutSuffix(rest, ")")
		if !ok {
			return a, "", fmt.Errorf("nat_addresses %q: bad is_chassis_resident", s)
		}
		var err error
		if where, err = strconv.Unquote(strings.TrimSpace(rest)); err != nil {
			return a, "", fmt.Errorf("nat_addresses %q: %w", s, err)
		}
		s = s[:i]
	}
	f := strings.Fields(s)
	if len(f) < 2 {
		return a, "", fmt.Errorf("nat_addresses %q: want a MAC and addresses", s)
	}
	mac, err := net.ParseMAC(f[0])
	if err != nil || len(mac) != 6 {
		return a, "", fmt.Errorf("nat_addresses %q: bad MAC", s)
	}
	a.MAC = mac
	for _, w := range f[1:] {
		ip, err := netip.ParseAddr(w)
		if err != nil {
			return a, "", fmt.Errorf("nat_addresses %q: bad address %q", s, w)
		}
		if ip.Is4() { // gratuitous ARP is for IPv4
			a.IPs = append(a.IPs, ip)
		}
	}
	return a, where, nil
}
