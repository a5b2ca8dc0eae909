package northd

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// FuzzNorthbound builds a Northbound from the input — random rows of the
// kinds nbWorld makes, then text from the input put into the columns
// ovn-northd parses (addresses, ACL matches, VIPs, options), ports listed
// by two switches and duplicate names — and runs a full compute and an
// incremental step on it. Nothing may panic, and the Southbound writes must
// settle.
func FuzzNorthbound(f *testing.F) {
	f.Add([]byte("seed"), "10.0.0.1", "ip4 && tcp.dst == 80", "30.0.0.1:80")
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, "zz:zz", "inport ==", "[::1]:99999")
	f.Add([]byte("x"), "unknown 1.2.3.4", "1 == 2 == 3", "1.2.3.4:0")
	f.Fuzz(func(t *testing.T, seed []byte, addr, match, vip string) {
		var s [8]byte
		copy(s[:], seed)
		h := newHarness(t)
		w := &nbWorld{t: t, h: h, rnd: rand.New(rand.NewPCG(binary.LittleEndian.Uint64(s[:]), 7))}
		for i := 0; i < 20; i++ {
			w.step()
		}
		// Hostile text where ovn-northd parses.
		ls, _ := w.pick(nb.LogicalSwitchTable)
		p := nb.LogicalSwitchPort{Name: "hostile", Addresses: []string{addr}, PortSecurity: []string{addr},
			Options: map[string]string{"requested-tnl-key": addr, "router-port": "hostile-lrp", "virtual-ip": addr, "virtual-parents": addr,
				"qdisc_queue_id": addr, "nat-addresses": addr, "requested-chassis": addr, "mcast_flood": "true", "reside-on-redirect-chassis": "true"},
			Type: []string{"", "router", "localnet", "virtual", "external", "vtep"}[len(addr)%6]}
		dhcp := h.nb.Insert(nb.DHCPOptionsTable, (&nb.DHCPOptions{CIDR: addr, Options: map[string]string{
			"server_id": addr, "server_mac": addr, "lease_time": addr, "router": addr}}).Row())
		p.DHCPv4Options, p.DHCPv6Options = &dhcp, &dhcp
		lrp := h.nb.Insert(nb.LogicalRouterPortTable, (&nb.LogicalRouterPort{Name: "hostile-lrp", MAC: addr, Networks: []string{addr, vip}}).Row())
		h.nb.Insert(nb.LogicalRouterTable, (&nb.LogicalRouter{Name: "hostile-lr", Ports: []ovsdb.UUID{lrp}}).Row())
		fg := h.nb.Insert(nb.ForwardingGroupTable, (&nb.ForwardingGroup{Name: "fg", VIP: addr, VMAC: addr, ChildPort: []string{addr}}).Row())
		pid := h.nb.Insert(nb.LogicalSwitchPortTable, p.Row())
		dup := h.nb.Insert(nb.LogicalSwitchPortTable, p.Row())
		acl := h.nb.Insert(nb.ACLTable, (&nb.ACL{Direction: "from-lport", Priority: int64(len(match)), Match: match, Action: "allow-related"}).Row())
		lb := h.nb.Insert(nb.LoadBalancerTable, (&nb.LoadBalancer{Name: "hostile", VIPs: map[string]string{vip: addr + "," + vip},
			Options: map[string]string{"affinity_timeout": addr}}).Row())
		if !ls.IsZero() {
			w.addMember(nb.LogicalSwitchTable, ls, "ports", pid)
			h.nb.commit()
			w.addMember(nb.LogicalSwitchTable, ls, "ports", dup)
			w.addMember(nb.LogicalSwitchTable, ls, "acls", acl)
			h.nb.commit()
			w.addMember(nb.LogicalSwitchTable, ls, "load_balancer", lb)
			w.addMember(nb.LogicalSwitchTable, ls, "forwarding_groups", fg)
			h.nb.Update(nb.LogicalSwitchTable, ls, map[string]ovsdb.Datum{"other_config": dMap(map[string]string{
				"mcast_snoop": "true", "mcast_idle_timeout": addr, "mcast_query_interval": addr, "mcast_table_size": addr})})
			// The same port on a second switch.
			other := h.nb.Insert(nb.LogicalSwitchTable, (&nb.LogicalSwitch{Name: "other", Ports: []ovsdb.UUID{pid}}).Row())
			_ = other
		}
		h.s.Apply(h.nb.diff(nil))
		h.nb.commit()
		h.s.Recompute()
		h.sync()
		w.step()
		h.sync()
	})
}
