package hvtest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// igmpV4Frame is an IGMPv1/v2 message of type typ about group from
// mac/src, sent to dst, as hosts send them: TTL 1 and the Router Alert
// option.
func igmpV4Frame(mac net.HardwareAddr, src netip.Addr, typ byte, group, dst netip.Addr) []byte {
	d4, g4, s4 := dst.As4(), group.As4(), src.As4()
	f := make([]byte, 14+24+8)
	copy(f[0:6], []byte{0x01, 0x00, 0x5e, d4[1] & 0x7f, d4[2], d4[3]})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[1], ip[8], ip[9] = 0x46, 0xc0, 1, 2
	binary.BigEndian.PutUint16(ip[2:], 24+8)
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	copy(ip[20:24], []byte{0x94, 0x04, 0, 0})
	binary.BigEndian.PutUint16(ip[10:], csum(0, ip[:24]))
	m := ip[24:]
	m[0] = typ
	copy(m[4:8], g4[:])
	binary.BigEndian.PutUint16(m[2:], csum(0, m))
	return f
}

// mldV1Frame is an MLDv1 message (131 report, 132 done) about group from
// mac/src (link-local), sent to dst: hop limit 1, a Hop-by-Hop Router
// Alert.
func mldV1Frame(mac net.HardwareAddr, src netip.Addr, typ byte, group, dst netip.Addr) []byte {
	d16 := dst.As16()
	f := make([]byte, 14+40+8+24)
	copy(f[0:6], []byte{0x33, 0x33, d16[12], d16[13], d16[14], d16[15]})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], 8+24)
	ip[6], ip[7] = 0, 1 // Hop-by-Hop next, hop limit 1
	copy(ip[8:24], src.AsSlice())
	copy(ip[24:40], dst.AsSlice())
	copy(ip[40:48], []byte{58, 0, 5, 2, 0, 0, 1, 0})
	m := ip[48:]
	m[0] = typ
	copy(m[8:24], group.AsSlice())
	var ps uint32
	for i := 8; i < 40; i += 2 {
		ps += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	binary.BigEndian.PutUint16(m[2:], csum(ps+58+24, m))
	return f
}

// TestMcastSnoopingDifferential: IGMPv1, IGMPv2 and MLDv1 membership,
// a flush and the querier, the same steps on the real ovn-controller and
// on govn chassis (two hypervisors each, the real ovn-northd), with the
// same IGMP_Group rows expected of both. Hosts' reports are crafted (the
// kernel's own, v3 and MLDv2, are TestGovnChassisIGMP's). A v2 or MLDv1
// report joins and a v2 leave or MLDv1 done leaves; a v1 report joins
// (v1 has no leave); ovn-sbctl ip-multicast-flush ends every membership
// of the switch. A port that sends a query has a multicast router
// behind it (IGMP_Group "mrouters", which each chassis has from the
// start): the others' reports reach it. As the querier, each chassis
// queries its own ports: a VM hears one IGMP and one MLD query an
// interval.
func TestMcastSnoopingDifferential(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	results := map[string][]string{}
	eachChassis(t, 2, func(t *testing.T, name string, c *Cluster) {
		results[name] = mcastSnooping(t, c)
	})
	if len(results) == 2 && !t.Failed() {
		t.Logf("queries as each saw them:\novn-controller: %s\ngovn chassis:   %s",
			strings.Join(results["ovn-controller"], "; "), strings.Join(results["govn-chassis"], "; "))
	}
}

// mcastSnooping runs the steps on c and returns what the VMs saw of the
// queries.
func mcastSnooping(t *testing.T, c *Cluster) []string {
	c.NBCtl(t, "ls-add", "ls1", "--", "set", "Logical_Switch", "ls1", "other_config:mcast_snoop=true")
	vms := map[string]*VM{}
	for i, hv := range []*Hypervisor{c.Hypervisor(1), c.Hypervisor(2)} {
		name := fmt.Sprintf("vm%d", i+1)
		mac := fmt.Sprintf("0a:00:00:00:00:0%d", i+1)
		ip := fmt.Sprintf("10.0.0.1%d", i+1)
		c.NBCtl(t, "lsp-add", "ls1", name, "--", "lsp-set-addresses", name, mac+" "+ip)
		vms[name] = c.AddVM(t, hv, VMSpec{Name: name, LSP: name, MAC: mac, Addr: ip + "/24"})
	}
	for name := range vms {
		c.WaitPortUp(t, name)
	}
	c.WaitHV(t)
	portName := map[string]string{}
	for name := range vms {
		portName[strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Port_Binding", "logical_port="+name))] = name
	}
	defer func() {
		if t.Failed() {
			t.Logf("IGMP_Group:\n%s\nIP_Multicast:\n%s", c.SBCtl(t, "list", "IGMP_Group"), c.SBCtl(t, "list", "IP_Multicast"))
		}
	}()
	fds := vmSockets(t, vms)
	// members is the group's members on every chassis, sorted.
	members := func(group string) string {
		var out []string
		for _, f := range strings.Fields(c.SBCtl(t, "--bare", "--columns=ports", "find", "IGMP_Group", fmt.Sprintf("address=%q", group))) {
			out = append(out, portName[f])
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	send := func(vm string, frame []byte) func() {
		return func() { _, _ = unix.Write(fds[vm], frame) }
	}
	step := func(what, group, want string, act func()) {
		t.Helper()
		if act != nil {
			act()
		}
		got := ""
		if err := waitFor(20*time.Second, what, func() bool { got = members(group); return got == want }); err != nil {
			t.Fatalf("%s: members of %s %q, want %q", what, group, got, want)
		}
	}
	mac := func(vm string) net.HardwareAddr { m, _ := net.ParseMAC(vms[vm].MAC); return m }
	g4, g6 := netip.MustParseAddr("239.1.1.1"), netip.MustParseAddr("ff05::1:3")
	allRouters, mldRouters := netip.MustParseAddr("224.0.0.2"), netip.MustParseAddr("ff02::2")
	ll := func(vm string) netip.Addr {
		m := mac(vm)
		return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]})
	}
	v4 := func(vm string) netip.Addr { return vms[vm].Addr.Addr() }

	// Each chassis has a row of the switch's multicast routers, without
	// ports until a port sends a query.
	if err := waitFor(20*time.Second, "a mrouters row from each chassis", func() bool {
		return len(strings.Fields(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "IGMP_Group", "address=mrouters"))) == 2
	}); err != nil {
		t.Fatal(err)
	}
	step("no multicast router yet", "mrouters", "", nil)
	step("vm1's IGMPv2 report", g4.String(), "vm1", send("vm1", igmpV4Frame(mac("vm1"), v4("vm1"), 0x16, g4, g4)))
	step("vm2's IGMPv1 report", g4.String(), "vm1,vm2", send("vm2", igmpV4Frame(mac("vm2"), v4("vm2"), 0x12, g4, g4)))
	step("vm1's IGMPv2 leave", g4.String(), "vm2", send("vm1", igmpV4Frame(mac("vm1"), v4("vm1"), 0x17, g4, allRouters)))
	step("vm1's MLDv1 report", g6.String(), "vm1", send("vm1", mldV1Frame(mac("vm1"), ll("vm1"), 131, g6, g6)))
	step("vm2's MLDv1 report", g6.String(), "vm1,vm2", send("vm2", mldV1Frame(mac("vm2"), ll("vm2"), 131, g6, g6)))
	step("vm1's MLDv1 done", g6.String(), "vm2", send("vm1", mldV1Frame(mac("vm1"), ll("vm1"), 132, g6, mldRouters)))
	step("ip-multicast-flush", g4.String(), "", func() { c.SBCtl(t, "ip-multicast-flush", "ls1") })
	step("after the flush", g6.String(), "", nil)

	// vm1 sends a query: a multicast router is behind its port, and
	// the reports of others reach it.
	query := igmpV4Frame(mac("vm1"), v4("vm1"), 0x11, netip.IPv4Unspecified(), netip.MustParseAddr("224.0.0.1"))
	query[14+24+1] = 100 // max response 10 s
	binary.BigEndian.PutUint16(query[14+24+2:], 0)
	binary.BigEndian.PutUint16(query[14+24+2:], csum(0, query[14+24:]))
	step("vm1's query", "mrouters", "vm1", send("vm1", query))
	g5 := netip.MustParseAddr("239.5.5.5")
	report := igmpV4Frame(mac("vm2"), v4("vm2"), 0x16, g5, g5)
	if err := waitFor(20*time.Second, "vm2's report at vm1, the multicast router", func() bool {
		_, _ = unix.Write(fds["vm2"], report)
		return receive(fds["vm1"], 500*time.Millisecond, func(b []byte) bool {
			return len(b) >= 14+24+8 && b[14+9] == 2 && b[14+24] == 0x16 && netip.AddrFrom4([4]byte(b[14+24+4:14+24+8])) == g5
		})
	}); err != nil {
		t.Error(err)
	}

	// The querier: each VM hears one IGMP and one MLD query an interval.
	c.NBCtl(t, "--wait=hv", "set", "Logical_Switch", "ls1", "other_config:mcast_querier=true",
		"other_config:mcast_eth_src=0a:00:00:00:00:fe", "other_config:mcast_ip4_src=10.0.0.254",
		"other_config:mcast_ip6_src=fe80::fe", "other_config:mcast_query_interval=2")
	time.Sleep(time.Second) // the first, sent at once
	type seen struct {
		igmp, mld int
		kinds     map[string]bool
	}
	watch := func(vm string, d time.Duration) seen {
		s := seen{kinds: map[string]bool{}}
		receive(fds[vm], d, func(b []byte) bool {
			if len(b) < 14 {
				return false
			}
			switch binary.BigEndian.Uint16(b[12:]) {
			case 0x0800:
				ip := b[14:]
				if len(ip) < 20 || ip[9] != 2 {
					return false
				}
				hl := int(ip[0]&15) * 4
				if len(ip) < hl+12 || ip[hl] != 0x11 {
					return false
				}
				s.igmp++
				s.kinds[fmt.Sprintf("IGMP query from %s ttl %d ihl %d len %d to %s", net.IP(ip[12:16]), ip[8], hl, len(ip)-hl, net.HardwareAddr(b[0:6]))] = true
			case 0x86dd:
				ip := b[14:]
				if len(ip) < 48+28 || ip[6] != 0 || ip[48] != 130 {
					return false
				}
				s.mld++
				s.kinds[fmt.Sprintf("MLD query from %s hop limit %d len %d to %s", netip.AddrFrom16([16]byte(ip[8:24])), ip[7], len(ip)-48, net.HardwareAddr(b[0:6]))] = true
			}
			return false
		})
		return s
	}
	var all []string
	saw := map[string]seen{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, vm := range []string{"vm1", "vm2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := watch(vm, 6*time.Second)
			mu.Lock()
			saw[vm] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, vm := range []string{"vm1", "vm2"} {
		s := saw[vm]
		t.Logf("%s saw %d IGMP and %d MLD queries in 6 s: %v", vm, s.igmp, s.mld, s.kinds)
		if s.igmp < 2 || s.igmp > 4 || s.mld < 2 || s.mld > 4 {
			t.Errorf("%s saw %d IGMP and %d MLD queries in 6 s, want one of each every 2 s", vm, s.igmp, s.mld)
		}
		for k := range s.kinds {
			all = append(all, vm+": "+k)
		}
	}
	slices.Sort(all)
	return all
}
