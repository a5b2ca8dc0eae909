package trace

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/sb"
)

// Southbound is the snapshot of the Southbound rows a trace reads: what
// a chassis compiles (controller.Input's tables) and what explains it.
type Southbound struct {
	Datapaths         []sb.DatapathBinding
	Ports             []sb.PortBinding
	Flows             []sb.LogicalFlow
	DPGroups          []sb.LogicalDPGroup
	Multicast         []sb.MulticastGroup
	AddressSets       []sb.AddressSet
	PortGroups        []sb.PortGroup
	Chassis           []sb.Chassis
	Encaps            []sb.Encap
	HAChassisGroups   []sb.HAChassisGroup
	HAChassis         []sb.HAChassis
	GatewayChassis    []sb.GatewayChassis
	MACBindings       []sb.MACBinding
	StaticMACBindings []sb.StaticMACBinding
	FDBs              []sb.FDB
	LoadBalancers     []sb.LoadBalancer
}

// ReadSouthbound copies the rows of a Southbound client's cache.
func ReadSouthbound(c *client.Cache) *Southbound {
	return &Southbound{
		Datapaths:         client.List[sb.DatapathBinding](c),
		Ports:             client.List[sb.PortBinding](c),
		Flows:             client.List[sb.LogicalFlow](c),
		DPGroups:          client.List[sb.LogicalDPGroup](c),
		Multicast:         client.List[sb.MulticastGroup](c),
		AddressSets:       client.List[sb.AddressSet](c),
		PortGroups:        client.List[sb.PortGroup](c),
		Chassis:           client.List[sb.Chassis](c),
		Encaps:            client.List[sb.Encap](c),
		HAChassisGroups:   client.List[sb.HAChassisGroup](c),
		HAChassis:         client.List[sb.HAChassis](c),
		GatewayChassis:    client.List[sb.GatewayChassis](c),
		MACBindings:       client.List[sb.MACBinding](c),
		StaticMACBindings: client.List[sb.StaticMACBinding](c),
		FDBs:              client.List[sb.FDB](c),
		LoadBalancers:     client.List[sb.LoadBalancer](c),
	}
}

// NBObject is a Northbound row named for a reader: its table, UUID, name
// (if it has one) and what it says (an ACL's match and action, a load
// balancer's VIPs).
type NBObject struct {
	Table  string `json:"table"`
	UUID   string `json:"uuid"`
	Name   string `json:"name,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func (o *NBObject) String() string {
	s := o.Table
	if o.Name != "" {
		s += " " + o.Name
	}
	s += " (" + o.UUID + ")"
	if o.Detail != "" {
		s += ": " + o.Detail
	}
	return s
}

// Northbound indexes the Northbound rows that own logical flows, by UUID
// and by name, so that a logical flow's stage-hint (the first 8 hex
// digits of its owner's UUID) or the port it names finds the row.
type Northbound struct {
	byPrefix map[string][]*NBObject
	ports    map[string]*NBObject // switch and router ports by name
}

// ReadNorthbound indexes a Northbound client's cache.
func ReadNorthbound(c *client.Cache) *Northbound {
	n := &Northbound{byPrefix: map[string][]*NBObject{}, ports: map[string]*NBObject{}}
	add := func(o *NBObject) *NBObject {
		p := o.UUID[:8]
		n.byPrefix[p] = append(n.byPrefix[p], o)
		return o
	}
	for _, r := range client.List[nb.ACL](c) {
		name := ""
		if r.Name != nil {
			name = *r.Name
		}
		add(&NBObject{Table: "ACL", UUID: r.UUID.String(), Name: name,
			Detail: fmt.Sprintf("%s priority %d %q %s", r.Direction, r.Priority, r.Match, r.Action)})
	}
	for _, r := range client.List[nb.LoadBalancer](c) {
		add(&NBObject{Table: "Load_Balancer", UUID: r.UUID.String(), Name: r.Name, Detail: "vips " + mapString(r.VIPs)})
	}
	for _, r := range client.List[nb.LogicalSwitchPort](c) {
		d := "addresses " + strings.Join(r.Addresses, ", ")
		if r.Type != "" {
			d = "type " + r.Type + ", " + d
		}
		n.ports[r.Name] = add(&NBObject{Table: "Logical_Switch_Port", UUID: r.UUID.String(), Name: r.Name, Detail: d})
	}
	for _, r := range client.List[nb.LogicalRouterPort](c) {
		n.ports[r.Name] = add(&NBObject{Table: "Logical_Router_Port", UUID: r.UUID.String(), Name: r.Name,
			Detail: r.MAC + " " + strings.Join(r.Networks, " ")})
	}
	for _, r := range client.List[nb.NAT](c) {
		add(&NBObject{Table: "NAT", UUID: r.UUID.String(), Detail: fmt.Sprintf("%s %s %s", r.Type, r.ExternalIP, r.LogicalIP)})
	}
	for _, r := range client.List[nb.LogicalRouterStaticRoute](c) {
		add(&NBObject{Table: "Logical_Router_Static_Route", UUID: r.UUID.String(), Detail: r.IPPrefix + " via " + r.Nexthop})
	}
	for _, r := range client.List[nb.LogicalRouterPolicy](c) {
		add(&NBObject{Table: "Logical_Router_Policy", UUID: r.UUID.String(), Detail: fmt.Sprintf("priority %d %q %s", r.Priority, r.Match, r.Action)})
	}
	for _, r := range client.List[nb.LogicalSwitch](c) {
		add(&NBObject{Table: "Logical_Switch", UUID: r.UUID.String(), Name: r.Name})
	}
	for _, r := range client.List[nb.LogicalRouter](c) {
		add(&NBObject{Table: "Logical_Router", UUID: r.UUID.String(), Name: r.Name})
	}
	for _, r := range client.List[nb.DHCPOptions](c) {
		add(&NBObject{Table: "DHCP_Options", UUID: r.UUID.String(), Detail: r.CIDR})
	}
	for _, r := range client.List[nb.PortGroup](c) {
		add(&NBObject{Table: "Port_Group", UUID: r.UUID.String(), Name: r.Name})
	}
	for _, r := range client.List[nb.QoS](c) {
		add(&NBObject{Table: "QoS", UUID: r.UUID.String(), Detail: fmt.Sprintf("%s priority %d %q", r.Direction, r.Priority, r.Match)})
	}
	return n
}

// hinted returns the row whose UUID starts with hint, if exactly one does.
func (n *Northbound) hinted(hint string) *NBObject {
	if n == nil || len(hint) != 8 {
		return nil
	}
	if os := n.byPrefix[hint]; len(os) == 1 {
		return os[0]
	}
	return nil
}

// byUUID returns the row with UUID id.
func (n *Northbound) byUUID(id string) *NBObject {
	if n == nil || len(id) < 8 {
		return nil
	}
	for _, o := range n.byPrefix[id[:8]] {
		if o.UUID == id {
			return o
		}
	}
	return nil
}

// port returns the switch or router port called name.
func (n *Northbound) port(name string) *NBObject {
	if n == nil {
		return nil
	}
	return n.ports[name]
}

func mapString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", k, m[k])
	}
	return b.String()
}

// Load reads the Southbound at sbRemote and, if nbRemote is not empty,
// the Northbound, once each ("unix:PATH", "tcp:IP:PORT").
func Load(ctx context.Context, sbRemote, nbRemote string) (*Southbound, *Northbound, error) {
	sc, err := client.Connect(ctx, client.Options{Endpoints: strings.Split(sbRemote, ","), Database: sb.DatabaseName})
	if err != nil {
		return nil, nil, fmt.Errorf("southbound %s: %w", sbRemote, err)
	}
	s := ReadSouthbound(sc.Cache())
	sc.Close()
	if nbRemote == "" {
		return s, nil, nil
	}
	nc, err := client.Connect(ctx, client.Options{Endpoints: strings.Split(nbRemote, ","), Database: nb.DatabaseName})
	if err != nil {
		return nil, nil, fmt.Errorf("northbound %s: %w", nbRemote, err)
	}
	n := ReadNorthbound(nc.Cache())
	nc.Close()
	return s, n, nil
}

// uuidPrefix32 is the first 32 bits of id: the cookie OVN gives the
// datapath rules of a logical flow.
func uuidPrefix32(id ovsdb.UUID) uint32 {
	b := id.Bytes()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
