package pinctrl

import (
	"net/netip"
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

// NewState reads the Southbound cache c.
func NewState(c *client.Cache) *State {
	st := &State{Datapaths: map[uint32]*Datapath{}, MACBindings: map[BindingKey]string{}}
	byUUID := map[ovsdb.UUID]*Datapath{}
	for _, d := range client.List[sb.DatapathBinding](c) {
		_, router := d.ExternalIDs["logical-router"]
		dp := &Datapath{UUID: d.UUID, Key: uint32(d.TunnelKey), Router: router,
			Ports: map[string]uint32{}, PortNames: map[uint32]string{}, DNS: map[string]string{}}
		st.Datapaths[dp.Key] = dp
		byUUID[d.UUID] = dp
	}
	for _, p := range client.List[sb.PortBinding](c) {
		if dp := byUUID[p.Datapath]; dp != nil {
			dp.Ports[p.LogicalPort] = uint32(p.TunnelKey)
			dp.PortNames[uint32(p.TunnelKey)] = p.LogicalPort
		}
	}
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
