package hvtest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// wireFields decodes a frame a VM received into named fields, for
// comparing what govn chassis and ovn-controller send: Ethernet, the IP
// header, and TCP, ICMP or ICMPv6 (neighbor advertisements included)
// with a check of the L4 checksum. Fields that name the receiver are
// compared with self (its MAC and IP) and left out.
func wireFields(t *testing.T, b []byte, selfMAC net.HardwareAddr, selfIP netip.Addr) map[string]string {
	t.Helper()
	f := map[string]string{}
	if len(b) < 14 {
		t.Fatalf("frame of %d bytes", len(b))
	}
	if !bytes.Equal(b[0:6], selfMAC) {
		t.Errorf("eth.dst %s, want %s", net.HardwareAddr(b[0:6]), selfMAC)
	}
	f["eth.src"] = net.HardwareAddr(b[6:12]).String()
	f["eth.type"] = hex.EncodeToString(b[12:14])
	p := b[14:]
	var l4 []byte
	var proto byte
	var pseudo uint32
	sum16 := func(s uint32, d []byte) uint32 {
		for i := 0; i+1 < len(d); i += 2 {
			s += uint32(binary.BigEndian.Uint16(d[i:]))
		}
		if len(d)%2 == 1 {
			s += uint32(d[len(d)-1]) << 8
		}
		return s
	}
	switch binary.BigEndian.Uint16(b[12:]) {
	case 0x0800:
		if len(p) < 20 {
			t.Fatalf("IPv4 packet of %d bytes", len(p))
		}
		hl := int(p[0]&0xf) * 4
		tl := int(binary.BigEndian.Uint16(p[2:]))
		if tl > len(p) || tl < hl {
			t.Fatalf("IPv4 total length %d of %d bytes", tl, len(p))
		}
		p = p[:tl]
		f["ip.version/ihl"] = fmt.Sprintf("%02x", p[0])
		f["ip.tos"] = fmt.Sprint(p[1])
		f["ip.total_length"] = fmt.Sprint(tl)
		f["ip.id is 0"] = fmt.Sprint(binary.BigEndian.Uint16(p[4:]) == 0)
		f["ip.flags/frag"] = hex.EncodeToString(p[6:8])
		f["ip.ttl"] = fmt.Sprint(p[8])
		f["ip.proto"] = fmt.Sprint(p[9])
		f["ip.src"] = netip.AddrFrom4([4]byte(p[12:16])).String()
		if dst := netip.AddrFrom4([4]byte(p[16:20])); dst != selfIP {
			t.Errorf("ip.dst %s, want %s", dst, selfIP)
		}
		proto, l4 = p[9], p[hl:]
		if proto != 1 {
			pseudo = sum16(sum16(0, p[12:16]), p[16:20]) + uint32(proto) + uint32(len(l4))
		}
	case 0x86dd:
		if len(p) < 40 {
			t.Fatalf("IPv6 packet of %d bytes", len(p))
		}
		pl := int(binary.BigEndian.Uint16(p[4:]))
		if 40+pl > len(p) {
			t.Fatalf("IPv6 payload length %d of %d bytes", pl, len(p)-40)
		}
		p = p[:40+pl]
		f["ip6.version/class/flow"] = hex.EncodeToString(p[0:4])
		f["ip6.payload_length"] = fmt.Sprint(pl)
		f["ip6.next"] = fmt.Sprint(p[6])
		f["ip6.hop_limit"] = fmt.Sprint(p[7])
		f["ip6.src"] = netip.AddrFrom16([16]byte(p[8:24])).String()
		if dst := netip.AddrFrom16([16]byte(p[24:40])); dst != selfIP {
			t.Errorf("ip6.dst %s, want %s", dst, selfIP)
		}
		proto, l4 = p[6], p[40:]
		pseudo = sum16(sum16(0, p[8:24]), p[24:40]) + uint32(proto) + uint32(len(l4))
	default:
		t.Fatalf("ethertype %x", b[12:14])
	}
	if proto == 132 { // SCTP: CRC32c, least significant byte first
		if len(l4) < 16 {
			t.Fatalf("SCTP packet of %d bytes", len(l4))
		}
		c := append([]byte(nil), l4...)
		want := binary.LittleEndian.Uint32(c[8:])
		clear(c[8:12])
		f["l4 checksum ok"] = fmt.Sprint(crc32.Checksum(c, crc32.MakeTable(crc32.Castagnoli)) == want)
		f["sctp.ports"] = hex.EncodeToString(l4[0:4])
		f["sctp.vtag"] = hex.EncodeToString(l4[4:8])
		f["sctp.chunks"] = hex.EncodeToString(l4[12:])
		return f
	}
	s := sum16(pseudo, l4)
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	f["l4 checksum ok"] = fmt.Sprint(s == 0xffff)
	switch proto {
	case 6:
		if len(l4) < 20 {
			t.Fatalf("TCP segment of %d bytes", len(l4))
		}
		f["tcp.ports"] = hex.EncodeToString(l4[0:4])
		f["tcp.seq"] = fmt.Sprint(binary.BigEndian.Uint32(l4[4:]))
		f["tcp.ack"] = fmt.Sprint(binary.BigEndian.Uint32(l4[8:]))
		f["tcp.offset/flags"] = hex.EncodeToString(l4[12:14])
		f["tcp.window"] = fmt.Sprint(binary.BigEndian.Uint16(l4[14:]))
		f["tcp.urgent"] = fmt.Sprint(binary.BigEndian.Uint16(l4[18:]))
		f["tcp.options+data"] = hex.EncodeToString(l4[20:])
	case 1, 58:
		if len(l4) < 8 {
			t.Fatalf("ICMP message of %d bytes", len(l4))
		}
		f["icmp.type/code"] = hex.EncodeToString(l4[0:2])
		if proto == 58 && l4[0] == 136 { // neighbor advertisement
			f["na.flags"] = hex.EncodeToString(l4[4:8])
			f["na.target"] = netip.AddrFrom16([16]byte(l4[8:24])).String()
			for o := 24; o+2 <= len(l4) && l4[o+1] > 0 && o+int(l4[o+1])*8 <= len(l4); o += int(l4[o+1]) * 8 {
				f[fmt.Sprintf("na.option %d", l4[o])] = hex.EncodeToString(l4[o+2 : o+int(l4[o+1])*8])
			}
			break
		}
		f["icmp.rest of header"] = hex.EncodeToString(l4[4:8])
		f["icmp.quoted bytes"] = fmt.Sprint(len(l4) - 8)
	default:
		t.Errorf("protocol %d", proto)
	}
	return f
}

// compareFields reports every field on which govn and real differ.
func compareFields(t *testing.T, govn, real map[string]string) {
	t.Helper()
	keys := map[string]bool{}
	for k := range govn {
		keys[k] = true
	}
	for k := range real {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	same := 0
	for _, k := range sorted {
		if govn[k] != real[k] {
			t.Errorf("%s: govn chassis %q, ovn-controller %q", k, govn[k], real[k])
		} else {
			same++
		}
	}
	t.Logf("%d of %d fields agree", same, len(keys))
}

// udpFrame is a UDP datagram (ports 40002 → port) to dst by way of dmac,
// over IPv4 or IPv6.
func udpFrame(dmac, smac net.HardwareAddr, src, dst netip.Addr, port uint16, payload []byte) []byte {
	udp := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 40002)
	binary.BigEndian.PutUint16(udp[2:], port)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	return ipFrame(dmac, smac, src, dst, 17, 64, udp, 6)
}

// ipFrame wraps an L4 payload of protocol proto in IPv4 or IPv6 and
// Ethernet, with its checksum at csumOff filled.
func ipFrame(dmac, smac net.HardwareAddr, src, dst netip.Addr, proto, ttl byte, l4 []byte, csumOff int) []byte {
	f := append(append([]byte(nil), dmac...), smac...)
	var ps uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			ps += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	add(src.AsSlice())
	add(dst.AsSlice())
	ps += uint32(proto) + uint32(len(l4))
	if proto == 1 {
		ps = 0
	}
	binary.BigEndian.PutUint16(l4[csumOff:], 0)
	binary.BigEndian.PutUint16(l4[csumOff:], csum(ps, l4))
	if src.Is4() {
		f = append(f, 0x08, 0x00)
		ip := make([]byte, 20)
		ip[0], ip[8], ip[9] = 0x45, ttl, proto
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		copy(ip[12:], src.AsSlice())
		copy(ip[16:], dst.AsSlice())
		binary.BigEndian.PutUint16(ip[10:], csum(0, ip))
		return append(append(f, ip...), l4...)
	}
	f = append(f, 0x86, 0xdd)
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
	ip[6], ip[7] = proto, ttl
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	return append(append(f, ip...), l4...)
}

// TestPinctrlWireDifferential (issue 12, acceptance b): what govn chassis
// (hv1) and the real ovn-controller (hv2) send for the same Southbound,
// each to a VM of its own, captured from the VM's interface and compared
// field by field: the TCP RST, SCTP ABORT and ICMP and ICMPv6 port
// unreachables of a reject ACL (reject), the ICMPv6 time exceeded of a
// router (icmp6), and the switch's neighbor advertisement for a port's
// address (nd_na). It found govn's resets with TTL 255 and no DF where
// ovn-controller sends 63 and DF, and govn answering SCTP to reject with
// ICMP where ovn-controller sends an ABORT; they agree now.
func TestPinctrlWireDifferential(t *testing.T) {
	c := govnChassisMix(t, 2, 2)
	c.NBCtl(t, "lr-add", "lr1")
	for _, n := range []struct{ ls, mac, cidr4, cidr6 string }{
		{"ls1", "0a:00:00:00:ff:11", "10.0.1.1/24", "aef1::1/64"},
		{"ls2", "0a:00:00:00:ff:12", "10.0.2.1/24", "aef2::1/64"},
	} {
		lrp, lsp := "lr1-"+n.ls, n.ls+"-lr1"
		c.NBCtl(t, "ls-add", n.ls, "--", "lrp-add", "lr1", lrp, n.mac, n.cidr4, n.cidr6,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	type vmInfo struct {
		vm  *VM
		fd  int
		mac net.HardwareAddr
		ip4 netip.Addr
		ip6 netip.Addr
	}
	vms := map[int]*vmInfo{}
	for i := 1; i <= 2; i++ {
		name, mac := fmt.Sprintf("vm%d", i), fmt.Sprintf("0a:00:00:00:01:0%d", i)
		ip4, ip6 := netip.MustParseAddr(fmt.Sprintf("10.0.1.1%d", i)), netip.MustParseAddr(fmt.Sprintf("aef1::1%d", i))
		c.NBCtl(t, "lsp-add", "ls1", name, "--", "lsp-set-addresses", name, fmt.Sprintf("%s %s %s", mac, ip4, ip6))
		vm := c.AddVM(t, c.Hypervisor(i), VMSpec{Name: name, LSP: name, MAC: mac, Addr: ip4.String() + "/24", Gateway: "10.0.1.1"})
		hw, _ := net.ParseMAC(mac)
		vms[i] = &vmInfo{vm: vm, mac: hw, ip4: ip4, ip6: ip6}
	}
	// far's port is on ls1 and bound nowhere: the reject ACL answers
	// for it at the sender's chassis.
	c.NBCtl(t, "lsp-add", "ls1", "far", "--", "lsp-set-addresses", "far", "0a:00:00:00:01:99 10.0.1.99 aef1::99")
	c.NBCtl(t, "acl-add", "ls1", "from-lport", "1000", "inport == {\"vm1\", \"vm2\"} && (tcp.dst == 9999 || udp.dst == 9999 || sctp.dst == 9999)", "reject")
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	c.WaitHV(t)
	for _, v := range vms {
		fd, _, err := rawSocket(v.vm.NS, v.vm.Dev)
		if err != nil {
			t.Fatal(err)
		}
		v.fd = fd
		defer unix.Close(fd)
	}
	farMAC, _ := net.ParseMAC("0a:00:00:00:01:99")
	routerMAC, _ := net.ParseMAC("0a:00:00:00:ff:11")
	far4, far6 := netip.MustParseAddr("10.0.1.99"), netip.MustParseAddr("aef1::99")

	// exchange sends build(v) from each VM until a frame that match
	// accepts comes back, and compares the two; norm, if not nil, takes
	// the fields that depend on the VM out of them.
	var norm func(v *vmInfo, f map[string]string)
	exchange := func(t *testing.T, build func(v *vmInfo) []byte, self func(v *vmInfo) netip.Addr, match func(v *vmInfo, b []byte) bool) {
		t.Helper()
		got := map[int]map[string]string{}
		for _, i := range []int{2, 1} {
			v := vms[i]
			var frame []byte
			for range 15 {
				_, _ = unix.Write(v.fd, build(v))
				if receive(v.fd, time.Second, func(b []byte) bool {
					if match(v, b) {
						frame = append([]byte(nil), b...)
						return true
					}
					return false
				}) {
					break
				}
			}
			if frame == nil {
				hv := c.Hypervisor(1)
				t.Fatalf("%s: no answer\npinctrl/show on hv1:\n%s", v.vm.Name, hv.Run(t, "ovn-appctl", "-t", hv.Dir+"/chassis.ctl", "pinctrl/show"))
			}
			got[i] = wireFields(t, frame, v.mac, self(v))
			if norm != nil {
				norm(v, got[i])
			}
		}
		compareFields(t, got[1], got[2])
	}
	self4 := func(v *vmInfo) netip.Addr { return v.ip4 }
	self6 := func(v *vmInfo) netip.Addr { return v.ip6 }
	ethType := func(b []byte) uint16 {
		if len(b) < 14 {
			return 0
		}
		return binary.BigEndian.Uint16(b[12:])
	}
	t.Run("tcp-reset", func(t *testing.T) {
		exchange(t, func(v *vmInfo) []byte { return tcpSYN(farMAC, v.mac, v.ip4, far4, 9999) }, self4,
			func(v *vmInfo, b []byte) bool {
				return ethType(b) == 0x0800 && len(b) >= 14+40 && b[14+9] == 6 && bytes.Equal(b[14+12:14+16], far4.AsSlice()) && b[14+33]&0x04 != 0
			})
	})
	t.Run("sctp-abort", func(t *testing.T) {
		// An INIT (initiate tag 0xabcdef01) is answered with an ABORT.
		exchange(t, func(v *vmInfo) []byte {
			s := make([]byte, 12+20)
			binary.BigEndian.PutUint16(s[0:], 40003)
			binary.BigEndian.PutUint16(s[2:], 9999)
			copy(s[12:], []byte{1, 0, 0, 20, 0xab, 0xcd, 0xef, 0x01, 0, 0, 0x10, 0, 0, 1, 0, 1, 0, 0, 0, 1})
			binary.LittleEndian.PutUint32(s[8:], crc32.Checksum(s, crc32.MakeTable(crc32.Castagnoli)))
			f := ipFrame(farMAC, v.mac, v.ip4, far4, 132, 64, s, 8)
			// ipFrame wrote an Internet checksum at 8: put the CRC back.
			l4 := f[14+20:]
			clear(l4[8:12])
			binary.LittleEndian.PutUint32(l4[8:], crc32.Checksum(l4, crc32.MakeTable(crc32.Castagnoli)))
			return f
		}, self4, func(v *vmInfo, b []byte) bool {
			return ethType(b) == 0x0800 && len(b) >= 14+20+16 && b[14+9] == 132 && bytes.Equal(b[14+12:14+16], far4.AsSlice())
		})
	})
	t.Run("udp-port-unreachable", func(t *testing.T) {
		exchange(t, func(v *vmInfo) []byte {
			return udpFrame(farMAC, v.mac, v.ip4, far4, 9999, bytes.Repeat([]byte("u"), 100))
		}, self4,
			func(v *vmInfo, b []byte) bool {
				return ethType(b) == 0x0800 && len(b) >= 14+28 && bytes.Equal(b[0:6], v.mac) && b[14+9] == 1 && b[14+20] == 3
			})
	})
	t.Run("udp6-port-unreachable", func(t *testing.T) {
		exchange(t, func(v *vmInfo) []byte {
			return udpFrame(farMAC, v.mac, v.ip6, far6, 9999, bytes.Repeat([]byte("u"), 100))
		}, self6,
			func(v *vmInfo, b []byte) bool {
				return ethType(b) == 0x86dd && len(b) >= 14+48 && bytes.Equal(b[0:6], v.mac) && b[14+6] == 58 && b[14+40] == 1
			})
	})
	t.Run("icmp6-time-exceeded", func(t *testing.T) {
		// Hop limit 1 through the router, to ls2.
		exchange(t, func(v *vmInfo) []byte {
			f := udpFrame(routerMAC, v.mac, v.ip6, netip.MustParseAddr("aef2::9"), 33434, bytes.Repeat([]byte("h"), 100))
			f[14+7] = 1
			return f
		}, self6, func(v *vmInfo, b []byte) bool {
			return ethType(b) == 0x86dd && len(b) >= 14+48 && bytes.Equal(b[0:6], v.mac) && b[14+6] == 58 && b[14+40] == 3
		})
	})
	t.Run("nd-na", func(t *testing.T) {
		// Each VM solicits the other's address; the switch answers.
		peer := func(v *vmInfo) *vmInfo {
			if v == vms[1] {
				return vms[2]
			}
			return vms[1]
		}
		norm = func(v *vmInfo, f map[string]string) {
			p := peer(v)
			for k, x := range f {
				switch x {
				case p.mac.String(), p.ip6.String(), hex.EncodeToString(p.mac):
					f[k] = "PEER"
				}
			}
		}
		defer func() { norm = nil }()
		exchange(t, func(v *vmInfo) []byte {
			target := peer(v).ip6.As16()
			sn := netip.AddrFrom16([16]byte{0xff, 0x02, 11: 1, 12: 0xff, 13: target[13], 14: target[14], 15: target[15]})
			ns := append(append([]byte{135, 0, 0, 0, 0, 0, 0, 0}, target[:]...), append([]byte{1, 1}, v.mac...)...)
			return ipFrame(net.HardwareAddr{0x33, 0x33, 0xff, target[13], target[14], target[15]}, v.mac, v.ip6, sn, 58, 255, ns, 2)
		}, self6, func(v *vmInfo, b []byte) bool {
			return ethType(b) == 0x86dd && len(b) >= 14+64 && b[14+6] == 58 && b[14+40] == 136 &&
				bytes.Equal(b[14+48:14+64], peer(v).ip6.AsSlice())
		})
	})
}
