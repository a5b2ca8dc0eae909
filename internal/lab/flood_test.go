package lab

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

func TestFloodDst(t *testing.T) {
	for _, c := range []struct {
		prefix string
		i      int
		want   string
	}{
		{"10.2.0.0/16", 0, "10.2.0.2"},
		{"10.2.0.0/16", 254, "10.2.1.0"},
		{"10.2.0.0/16", 64999, "10.2.253.233"},
		{"10.2.0.0/16", 65000, "10.2.0.2"}, // starts over
		{"10.2.7.9/24", 0, "10.2.7.2"},
		{"10.2.7.0/24", 252, "10.2.7.254"},
		{"10.2.7.0/24", 253, "10.2.7.2"}, // 253 addresses: .2 to .254
		{"192.168.0.0/30", 5, "192.168.0.2"},
	} {
		if got := FloodDst(netip.MustParsePrefix(c.prefix), c.i); got.String() != c.want {
			t.Errorf("FloodDst(%s, %d) = %s, want %s", c.prefix, c.i, got, c.want)
		}
	}
}

func TestMissFrame(t *testing.T) {
	rmac, _ := net.ParseMAC("0a:00:00:00:ff:11")
	smac, _ := net.ParseMAC("0a:00:00:00:01:01")
	f := MissFrame(rmac, smac, netip.MustParseAddr("10.0.1.11"), netip.MustParseAddr("10.2.3.4"))
	if net.HardwareAddr(f[0:6]).String() != rmac.String() || net.HardwareAddr(f[6:12]).String() != smac.String() || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		t.Fatalf("Ethernet header % x", f[:14])
	}
	ip := f[14:34]
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		t.Errorf("IPv4 header checksum does not verify: %#x", sum)
	}
	if ip[9] != 17 || netip.AddrFrom4([4]byte(ip[16:20])).String() != "10.2.3.4" || int(binary.BigEndian.Uint16(ip[2:])) != len(f)-14 {
		t.Errorf("IPv4 header % x", ip)
	}
	if binary.BigEndian.Uint16(f[36:]) != 9 {
		t.Errorf("UDP destination port %d, want 9", binary.BigEndian.Uint16(f[36:]))
	}
}
