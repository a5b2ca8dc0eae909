package lab

import (
	"bytes"
	"net"
	"net/netip"
	"reflect"
	"testing"
)

func TestDHCPMessageRoundTrip(t *testing.T) {
	mac, _ := net.ParseMAC("0a:00:00:00:00:04")
	for _, m := range []*dhcpMsg{
		{Op: 1, XID: 0x01020304, Flags: 0x8000, CHAddr: mac,
			Options: []dhcpOption{{optMsgType, []byte{dhcpDiscover}}, {optParamList, []byte{1, 3, 51}}}},
		{Op: 2, XID: 7, YIAddr: netip.MustParseAddr("10.0.0.14"), CIAddr: netip.MustParseAddr("10.0.0.2"), CHAddr: mac,
			Options: []dhcpOption{{optMsgType, []byte{dhcpAck}}, {optSubnetMask, []byte{255, 255, 255, 0}},
				{optRouter, []byte{10, 0, 0, 1}}, {optServerID, []byte{10, 0, 0, 1}}, {optLeaseTime, []byte{0, 0, 14, 16}}}},
		{Op: 1, XID: 9, CHAddr: mac, Options: []dhcpOption{{optMsgType, []byte{dhcpRequest}}, {200, nil}}},
	} {
		b := m.marshal()
		if len(b) < 300 {
			t.Errorf("xid %d: %d bytes, want at least 300", m.XID, len(b))
		}
		got, err := parseDHCP(b)
		if err != nil {
			t.Fatalf("xid %d: %v", m.XID, err)
		}
		want := *m
		for _, a := range []*netip.Addr{&want.CIAddr, &want.YIAddr} {
			if !a.IsValid() {
				*a = netip.IPv4Unspecified()
			}
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("xid %d: parsed\n%+v\nwant\n%+v", m.XID, got, &want)
		}
	}
}

func TestDHCPAccessors(t *testing.T) {
	m := &dhcpMsg{Options: []dhcpOption{
		{optMsgType, []byte{dhcpOffer}},
		{optRouter, []byte{10, 0, 0, 1, 10, 0, 0, 2}},
		{optServerID, []byte{10, 0}},
	}}
	if got := m.msgType(); got != dhcpOffer {
		t.Errorf("msgType = %d, want %d", got, dhcpOffer)
	}
	if got := m.optionAddr(optRouter); got != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("router = %v, want the first address 10.0.0.1", got)
	}
	if got := m.optionAddr(optServerID); got.IsValid() {
		t.Errorf("a 2-byte server id gave %v, want none", got)
	}
	if got := (&dhcpMsg{Options: []dhcpOption{{optMsgType, []byte{1, 2}}}}).msgType(); got != 0 {
		t.Errorf("a 2-byte message type gave %d, want 0", got)
	}
}

func TestParseDHCPRejects(t *testing.T) {
	good := (&dhcpMsg{Op: 2, XID: 1, CHAddr: make(net.HardwareAddr, 6),
		Options: []dhcpOption{{optMsgType, []byte{dhcpOffer}}}}).marshal()
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"short", good[:239]},
		{"no cookie", func() []byte { b := bytes.Clone(good); b[236] = 0; return b }()},
		{"token ring", func() []byte { b := bytes.Clone(good); b[1] = 6; return b }()},
		{"truncated option", append(bytes.Clone(good[:dhcpFixedLen]), optRouter, 4, 10, 0)},
		{"option without length", append(bytes.Clone(good[:dhcpFixedLen]), optRouter)},
	} {
		if m, err := parseDHCP(c.b); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", c.name, m)
		}
	}
}

func TestIPv4UDP(t *testing.T) {
	for _, c := range []struct {
		src, dst     string
		sport, dport uint16
		payload      []byte
	}{
		{"0.0.0.0", "255.255.255.255", 68, 67, []byte("even")},
		{"10.0.0.1", "10.0.0.14", 67, 68, []byte("odd")},
		{"192.168.1.1", "192.168.1.2", 1, 2, nil},
	} {
		b := ipv4UDP(netip.MustParseAddr(c.src), netip.MustParseAddr(c.dst), c.sport, c.dport, c.payload)
		if got := onesSum(0, b[:20]); got != 0xffff {
			t.Errorf("%s → %s: IP header sums to %#x, want 0xffff", c.src, c.dst, got)
		}
		pseudo := append(append([]byte{}, b[12:20]...), 0, 17, byte((len(b)-20)>>8), byte(len(b)-20))
		if got := onesSum(onesSum(0, pseudo), b[20:]); got != 0xffff {
			t.Errorf("%s → %s: UDP datagram sums to %#x, want 0xffff", c.src, c.dst, got)
		}
		dport, payload, ok := parseIPv4UDP(b)
		if !ok || dport != c.dport || !bytes.Equal(payload, c.payload) {
			t.Errorf("%s → %s: parsed port %d payload %q ok %v", c.src, c.dst, dport, payload, ok)
		}
		// Trailing bytes (Ethernet padding) are not payload.
		if _, payload, ok := parseIPv4UDP(append(b, 0, 0, 0)); !ok || !bytes.Equal(payload, c.payload) {
			t.Errorf("%s → %s with padding: payload %q ok %v", c.src, c.dst, payload, ok)
		}
		if _, _, ok := parseIPv4UDP(b[:len(b)-1]); ok {
			t.Errorf("%s → %s: a truncated packet parsed", c.src, c.dst)
		}
	}
}

func FuzzParseDHCP(f *testing.F) {
	mac, _ := net.ParseMAC("0a:00:00:00:00:04")
	f.Add((&dhcpMsg{Op: 2, XID: 1, CHAddr: mac, Options: []dhcpOption{{optMsgType, []byte{dhcpAck}},
		{optSubnetMask, []byte{255, 255, 255, 0}}}}).marshal())
	f.Add(make([]byte, dhcpFixedLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseDHCP(b)
		if err != nil {
			return
		}
		// What parses re-encodes to a message that parses the same.
		again, err := parseDHCP(m.marshal())
		if err != nil {
			t.Fatalf("re-encoded message does not parse: %v", err)
		}
		if again.XID != m.XID || len(again.Options) != len(m.Options) || again.msgType() != m.msgType() {
			t.Fatalf("re-encoded message differs: %+v, was %+v", again, m)
		}
	})
}

func FuzzParseIPv4UDP(f *testing.F) {
	f.Add(ipv4UDP(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 67, 68, []byte("x")))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, payload, ok := parseIPv4UDP(b)
		if ok && len(payload) > len(b) {
			t.Fatalf("payload of %d bytes from a %d-byte packet", len(payload), len(b))
		}
	})
}
