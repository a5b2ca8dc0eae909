package difftrace

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/nb"
)

// topology is the part of a Northbound that packets are generated from,
// with its references resolved. Everything is in name order, so that the
// same Northbound always gives the same packets.
type topology struct {
	switches []*lswitch
	routers  []*lrouter
	ports    map[string]*lport // every switch port by name
}

type lswitch struct {
	name     string
	ports    []*lport
	acls     []nb.ACL // the switch's own and its ports' port groups'
	lbs      []nb.LoadBalancer
	dns      bool
	prefixes []netip.Prefix // subnets the switch's addresses come from
}

type lport struct {
	name    string
	typ     string
	sw      *lswitch
	addrs   []endpoint // from addresses (or the router port for type router)
	unknown bool       // addresses include "unknown"
	secured bool       // port_security is set
	dhcp4   bool
	dhcp6   bool
	rp      *routerPort // the peer of a type router port
}

// endpoint is one MAC with the IP addresses that go with it.
type endpoint struct {
	mac string
	ip4 []netip.Addr
	ip6 []netip.Addr
}

type lrouter struct {
	name     string
	ports    []*routerPort
	nats     []nb.NAT
	routes   []nb.LogicalRouterStaticRoute
	policies []nb.LogicalRouterPolicy
	lbs      []nb.LoadBalancer
}

type routerPort struct {
	name   string
	mac    string
	nets   []netip.Prefix
	router *lrouter
	sw     *lswitch // the switch its peer port is on, if any
}

// readTopology reads the Northbound at remote (a unix: socket).
func readTopology(ctx context.Context, remote string) (*topology, error) {
	c, err := client.Connect(ctx, client.Options{
		Endpoints: []string{remote},
		Database:  nb.DatabaseName,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, fmt.Errorf("read the Northbound at %s: %w", remote, err)
	}
	defer c.Close()
	return buildTopology(c.Cache()), nil
}

func buildTopology(cache *client.Cache) *topology {
	lbs := map[ovsdb.UUID]nb.LoadBalancer{}
	for _, lb := range client.List[nb.LoadBalancer](cache) {
		lbs[lb.UUID] = lb
	}
	groups := map[ovsdb.UUID][]ovsdb.UUID{}
	for _, g := range client.List[nb.LoadBalancerGroup](cache) {
		groups[g.UUID] = g.LoadBalancer
	}
	lbsOf := func(direct, viaGroups []ovsdb.UUID) []nb.LoadBalancer {
		var out []nb.LoadBalancer
		add := func(ids []ovsdb.UUID) {
			for _, id := range ids {
				if lb, ok := lbs[id]; ok && !slices.ContainsFunc(out, func(o nb.LoadBalancer) bool { return o.UUID == id }) {
					out = append(out, lb)
				}
			}
		}
		add(direct)
		for _, g := range viaGroups {
			add(groups[g])
		}
		slices.SortFunc(out, func(a, b nb.LoadBalancer) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	acls := map[ovsdb.UUID]nb.ACL{}
	for _, a := range client.List[nb.ACL](cache) {
		acls[a.UUID] = a
	}
	pgACLs := map[ovsdb.UUID][]ovsdb.UUID{} // switch port → ACLs of its port groups
	for _, pg := range client.List[nb.PortGroup](cache) {
		for _, p := range pg.Ports {
			pgACLs[p] = append(pgACLs[p], pg.ACLs...)
		}
	}

	t := &topology{ports: map[string]*lport{}}
	rps := map[string]*routerPort{}
	for _, r := range client.List[nb.LogicalRouter](cache) {
		lr := &lrouter{name: r.Name, lbs: lbsOf(r.LoadBalancer, r.LoadBalancerGroup)}
		for _, id := range r.Ports {
			p, ok := client.Get[nb.LogicalRouterPort](cache, id)
			if !ok {
				continue
			}
			rp := &routerPort{name: p.Name, mac: p.MAC, router: lr}
			for _, n := range p.Networks {
				if pfx, err := netip.ParsePrefix(n); err == nil {
					rp.nets = append(rp.nets, pfx)
				}
			}
			lr.ports = append(lr.ports, rp)
			rps[p.Name] = rp
		}
		slices.SortFunc(lr.ports, func(a, b *routerPort) int { return strings.Compare(a.name, b.name) })
		for _, id := range r.NAT {
			if n, ok := client.Get[nb.NAT](cache, id); ok {
				lr.nats = append(lr.nats, n)
			}
		}
		slices.SortFunc(lr.nats, func(a, b nb.NAT) int {
			return strings.Compare(a.Type+a.ExternalIP+a.LogicalIP, b.Type+b.ExternalIP+b.LogicalIP)
		})
		for _, id := range r.StaticRoutes {
			if s, ok := client.Get[nb.LogicalRouterStaticRoute](cache, id); ok {
				lr.routes = append(lr.routes, s)
			}
		}
		slices.SortFunc(lr.routes, func(a, b nb.LogicalRouterStaticRoute) int {
			return strings.Compare(a.IPPrefix+" "+a.Nexthop, b.IPPrefix+" "+b.Nexthop)
		})
		for _, id := range r.Policies {
			if p, ok := client.Get[nb.LogicalRouterPolicy](cache, id); ok {
				lr.policies = append(lr.policies, p)
			}
		}
		slices.SortFunc(lr.policies, func(a, b nb.LogicalRouterPolicy) int {
			return strings.Compare(fmt.Sprintf("%08d %s", a.Priority, a.Match), fmt.Sprintf("%08d %s", b.Priority, b.Match))
		})
		t.routers = append(t.routers, lr)
	}
	slices.SortFunc(t.routers, func(a, b *lrouter) int { return strings.Compare(a.name, b.name) })

	for _, s := range client.List[nb.LogicalSwitch](cache) {
		sw := &lswitch{name: s.Name, lbs: lbsOf(s.LoadBalancer, s.LoadBalancerGroup), dns: len(s.DNSRecords) > 0}
		aclIDs := slices.Clone(s.ACLs)
		for _, id := range s.Ports {
			p, ok := client.Get[nb.LogicalSwitchPort](cache, id)
			if !ok {
				continue
			}
			aclIDs = append(aclIDs, pgACLs[id]...)
			lp := &lport{name: p.Name, typ: p.Type, sw: sw, secured: len(p.PortSecurity) > 0,
				dhcp4: p.DHCPv4Options != nil, dhcp6: p.DHCPv6Options != nil}
			for _, a := range p.Addresses {
				switch a {
				case "unknown":
					lp.unknown = true
				case "router", "dynamic":
				default:
					if ep, ok := parseEndpoint(a); ok {
						lp.addrs = append(lp.addrs, ep)
					}
				}
			}
			if p.Type == "router" {
				if rp := rps[p.Options["router-port"]]; rp != nil {
					lp.rp = rp
					rp.sw = sw
					ep := endpoint{mac: rp.mac}
					for _, n := range rp.nets {
						if n.Addr().Is4() {
							ep.ip4 = append(ep.ip4, n.Addr())
						} else {
							ep.ip6 = append(ep.ip6, n.Addr())
						}
					}
					lp.addrs = []endpoint{ep}
				}
			}
			sw.ports = append(sw.ports, lp)
			t.ports[lp.name] = lp
		}
		slices.SortFunc(sw.ports, func(a, b *lport) int { return strings.Compare(a.name, b.name) })
		seen := map[ovsdb.UUID]bool{}
		for _, id := range aclIDs {
			if a, ok := acls[id]; ok && !seen[id] {
				seen[id] = true
				sw.acls = append(sw.acls, a)
			}
		}
		slices.SortFunc(sw.acls, func(a, b nb.ACL) int {
			return strings.Compare(fmt.Sprintf("%s %08d %s", a.Direction, a.Priority, a.Match), fmt.Sprintf("%s %08d %s", b.Direction, b.Priority, b.Match))
		})
		sw.prefixes = switchPrefixes(sw, s.OtherConfig)
		t.switches = append(t.switches, sw)
	}
	slices.SortFunc(t.switches, func(a, b *lswitch) int { return strings.Compare(a.name, b.name) })
	return t
}

// parseEndpoint parses one entry of Logical_Switch_Port addresses: a MAC
// followed by IP addresses.
func parseEndpoint(s string) (endpoint, bool) {
	f := strings.Fields(s)
	if len(f) == 0 || strings.Count(f[0], ":") != 5 {
		return endpoint{}, false
	}
	ep := endpoint{mac: strings.ToLower(f[0])}
	for _, a := range f[1:] {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			if p, err := netip.ParsePrefix(a); err == nil {
				ip = p.Addr()
			} else {
				continue
			}
		}
		if ip.Is4() {
			ep.ip4 = append(ep.ip4, ip)
		} else {
			ep.ip6 = append(ep.ip6, ip)
		}
	}
	return ep, true
}

// switchPrefixes are the subnets a switch's hosts live in: its router
// ports' networks, other_config:subnet and ipv6_prefix, and the /24 or /64
// around each port address, first seen first.
func switchPrefixes(sw *lswitch, otherConfig map[string]string) []netip.Prefix {
	var out []netip.Prefix
	add := func(p netip.Prefix) {
		p = p.Masked()
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range sw.ports {
		if p.rp != nil {
			for _, n := range p.rp.nets {
				add(n)
			}
		}
	}
	for _, k := range []string{"subnet", "ipv6_prefix"} {
		if v, ok := otherConfig[k]; ok {
			if p, err := netip.ParsePrefix(v); err == nil {
				add(p)
			} else if a, err := netip.ParseAddr(strings.TrimSuffix(v, "::")); err == nil {
				add(netip.PrefixFrom(a, 64))
			}
		}
	}
	for _, p := range sw.ports {
		for _, ep := range p.addrs {
			for _, ip := range ep.ip4 {
				add(netip.PrefixFrom(ip, 24))
			}
			for _, ip := range ep.ip6 {
				add(netip.PrefixFrom(ip, 64))
			}
		}
	}
	return out
}
