package pinctrl

import (
	"net/netip"
	"sort"
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
	// RAPorts are the router ports that send periodic router
	// advertisements onto a switch with a port bound here.
	RAPorts []RAPort
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
	st := &State{Datapaths: map[uint32]*Datapath{}, MACBindings: map[BindingKey]string{}}
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
		}
	}
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
