package northd

import (
	"fmt"
	"hash/fnv"
	"net/netip"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// BFD sessions and static MAC bindings: Northbound rows that name a router
// port and become Southbound rows on its router's datapath.

// bfdUDPPort is the destination port of BFD control packets (RFC 5881).
const bfdUDPPort = 3784

// bfdSrcPortBase is the first of the source ports BFD sessions use
// (RFC 5881: 49152 to 65535).
const bfdSrcPortBase = 49152

// routerPortRouter returns the router port named name and its router's
// UUID.
func routerPortRouter(g *gen, name string) (*routerPort, bool) {
	ids := g.ByName(NB, nb.LogicalRouterPortTable, name)
	if len(ids) == 0 {
		return nil, false
	}
	return readRouterPort(g, ids[0])
}

func genStaticMACBinding(g *gen) {
	smb, ok := Read[nb.StaticMACBinding](g, NB, g.ID())
	if !ok {
		return
	}
	p, ok := routerPortRouter(g, smb.LogicalPort)
	if !ok {
		g.Warn("static MAC binding of an unknown router port; skipping it", "port", smb.LogicalPort)
		return
	}
	if _, err := netip.ParseAddr(smb.IP); err != nil {
		g.Warn("bad static MAC binding IP; skipping it", "port", smb.LogicalPort, "ip", smb.IP)
		return
	}
	g.Record("Static_MAC_Binding", smb.LogicalPort+"/"+smb.IP, map[string]ovsdb.Datum{
		"logical_port":         dString(smb.LogicalPort),
		"ip":                   dString(smb.IP),
		"mac":                  dString(smb.MAC),
		"override_dynamic_mac": dBool(smb.OverrideDynamicMAC),
		"datapath":             dUUID(g.Ref("Datapath_Binding", p.router.String())),
	})
}

func genBFD(g *gen) {
	b, ok := Read[nb.BFD](g, NB, g.ID())
	if !ok {
		return
	}
	if _, err := netip.ParseAddr(b.DstIP); err != nil {
		g.Warn("bad BFD dst_ip; skipping the session", "port", b.LogicalPort, "dst_ip", b.DstIP)
		return
	}
	key := bfdSessionKey(b.LogicalPort, b.DstIP)
	// Source ports are handed out like tunnel keys, in a space of their
	// own, and the ones in the Southbound are kept (seedKeys). The
	// discriminator only has to be non-zero and differ between sessions:
	// the one in the Southbound, else one derived from the session, so
	// that it stays the same.
	n := g.claimKey(bfdKeySpace, key, 0)
	if n == 0 || n > 65535-bfdSrcPortBase+1 {
		g.Warn("no BFD source port left; skipping the session", "port", b.LogicalPort, "dst_ip", b.DstIP)
		return
	}
	disc, ok := g.s.bfdDisc[key]
	if !ok {
		h := fnv.New32a()
		h.Write([]byte(key))
		disc = int64(h.Sum32()&0x7fffffff) | 1
	}
	opt := func(p *int64, def int64) int64 {
		if p != nil {
			return *p
		}
		return def
	}
	g.Record("BFD", key, map[string]ovsdb.Datum{
		"logical_port": dString(b.LogicalPort),
		"dst_ip":       dString(b.DstIP),
		"src_port":     dInt(int64(bfdSrcPortBase + n - 1)),
		"disc":         dInt(disc),
		"min_tx":       dInt(opt(b.MinTx, 1000)),
		"min_rx":       dInt(opt(b.MinRx, 1000)),
		"detect_mult":  dInt(opt(b.DetectMult, 5)),
		"options":      dMap(b.Options),
		"external_ids": dMap(b.ExternalIDs),
	})
}

// bfdSessionKey names a BFD session: its router port and peer address.
func bfdSessionKey(port, dstIP string) string { return port + "/" + dstIP }

// bfdKeySpace names the key space of BFD source ports (a UUID no row has).
var bfdKeySpace = ovsdb.MustParseUUID("bfd00000-0000-4000-8000-000000000000")

// routerPortBFDFlows writes the flows of a router port with BFD sessions:
// their packets to and from the port's addresses go to ovn-controller, and
// to the neighbors they are routed directly.
func routerPortBFDFlows(g *gen, r *logicalRouter, p *routerPort) {
	if len(g.ByName(NB, nb.BFDTable, p.nb.Name)) == 0 {
		return
	}
	dp, id := r.dp, p.nb.UUID
	if v4 := p.ipv4(); len(v4) > 0 {
		a := v4[0].Addr()
		g.FlowHint(dp, LRInIPInput, 110, fmt.Sprintf("ip4.src == %s && udp.dst == %d", a, bfdUDPPort), "next; ", id)
		g.FlowHint(dp, LRInIPInput, 110, fmt.Sprintf("ip4.dst == %s && udp.dst == %d", a, bfdUDPPort), "handle_bfd_msg(); ", id)
		for _, n := range v4 {
			g.FlowHint(dp, LRInIPRouting, routePriority(n.Bits(), routeConnected)+1, fmt.Sprintf("ip4.dst == %s && udp.dst == %d", n.Masked(), bfdUDPPort),
				fmt.Sprintf("reg8[0..15] = 0; reg0 = ip4.dst; reg1 = %s; eth.src = %s; outport = %q; flags.loopback = 1; next;", n.Addr(), p.mac, p.nb.Name), id)
		}
	}
	a := p.firstIPv6()
	g.FlowHint(dp, LRInIPInput, 110, fmt.Sprintf("ip6.src == %s && udp.dst == %d", a, bfdUDPPort), "next; ", id)
	g.FlowHint(dp, LRInIPInput, 110, fmt.Sprintf("ip6.dst == %s && udp.dst == %d", a, bfdUDPPort), "handle_bfd_msg(); ", id)
	for _, n := range p.ipv6() {
		g.FlowHint(dp, LRInIPRouting, routePriority(n.Bits(), routeConnected)+1, fmt.Sprintf("ip6.dst == %s && udp.dst == %d", n.Masked(), bfdUDPPort),
			fmt.Sprintf("reg8[0..15] = 0; xxreg0 = ip6.dst; xxreg1 = %s; eth.src = %s; outport = %q; flags.loopback = 1; next;", n.Addr(), p.mac, p.nb.Name), id)
	}
	g.FlowHint(dp, LRInIPRouting, routePriority(64, routeConnected)+1, fmt.Sprintf("inport == %q && ip6.dst == fe80::/64 && udp.dst == %d", p.nb.Name, bfdUDPPort),
		fmt.Sprintf("reg8[0..15] = 0; xxreg0 = ip6.dst; xxreg1 = %s; eth.src = %s; outport = %q; flags.loopback = 1; next;", p.lla, p.mac, p.nb.Name), id)
}
