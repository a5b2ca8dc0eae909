package pinctrl

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/govn/govn/datapath/flow"
)

var (
	group1 = netip.MustParseAddr("239.1.1.1")
	group2 = netip.MustParseAddr("239.2.2.2")
)

// igmpMsg returns an IGMP message of type typ for group, followed by
// body, checksummed.
func igmpMsg(typ byte, group netip.Addr, body ...byte) []byte {
	b := make([]byte, 8, 8+len(body))
	b[0] = typ
	copy(b[4:], group.AsSlice()) // v3: no group there
	b = append(b, body...)
	binary.BigEndian.PutUint16(b[2:], fold(onesSum(0, b)))
	return b
}

// v3Record is an IGMPv3 group record without auxiliary data.
func v3Record(typ byte, group netip.Addr, sources ...netip.Addr) []byte {
	r := []byte{typ, 0, 0, byte(len(sources))}
	r = append(r, group.AsSlice()...)
	for _, s := range sources {
		r = append(r, s.AsSlice()...)
	}
	return r
}

// v3Report is an IGMPv3 report of records.
func v3Report(records ...[]byte) []byte {
	var body []byte
	for _, r := range records {
		body = append(body, r...)
	}
	b := igmpMsg(igmpV3Report, netip.Addr{}, body...)
	binary.BigEndian.PutUint16(b[6:], uint16(len(records)))
	binary.BigEndian.PutUint16(b[2:], 0)
	binary.BigEndian.PutUint16(b[2:], fold(onesSum(0, b)))
	return b
}

// igmpFrame is an IGMP message from the VM, as the kernel sends it (TTL
// 1, to the group or, for v3, to 224.0.0.22).
func igmpFrame(msg []byte, dst netip.Addr) []byte {
	mac := net.HardwareAddr{0x01, 0x00, 0x5e, dst.As4()[1] & 0x7f, dst.As4()[2], dst.As4()[3]}
	return ethFrame(mac, vmMAC, etherIPv4, ipPacket(vmIP, dst, 2, 1, msg, -1))
}

func TestParseIGMP(t *testing.T) {
	src := netip.MustParseAddr("10.0.0.99")
	corrupt := igmpMsg(igmpV2Report, group1)
	corrupt[7]++
	for _, tc := range []struct {
		name    string
		msg     []byte
		want    []groupChange
		query   bool
		wantErr bool
	}{
		{"v1 report", igmpMsg(igmpV1Report, group1), []groupChange{{group1, true}}, false, false},
		{"v2 report", igmpMsg(igmpV2Report, group1), []groupChange{{group1, true}}, false, false},
		{"v2 leave", igmpMsg(igmpV2Leave, group1), []groupChange{{group1, false}}, false, false},
		{"query", igmpMsg(igmpQuery, netip.IPv4Unspecified()), nil, true, false},
		{"link-local group", igmpMsg(igmpV2Report, netip.MustParseAddr("224.0.0.251")), nil, false, false},
		{"unicast group", igmpMsg(igmpV2Report, vmIP), nil, false, false},
		{"v3 join and leave", v3Report(
			v3Record(igmpChangeToExclude, group1),
			v3Record(igmpChangeToInclude, group2)),
			[]groupChange{{group1, true}, {group2, false}}, false, false},
		{"v3 modes", v3Report(
			v3Record(igmpModeIsExclude, group1),
			v3Record(igmpModeIsInclude, group2, src),
			v3Record(igmpModeIsInclude, group1),
			v3Record(igmpAllowNew, group2, src),
			v3Record(igmpBlockOld, group1, src),
			v3Record(99, group2)),
			[]groupChange{{group1, true}, {group2, true}, {group1, false}, {group2, true}, {group1, true}}, false, false},
		{"v3 truncated record", func() []byte {
			b := v3Report(v3Record(igmpChangeToExclude, group1, src))
			b = b[:len(b)-2]
			binary.BigEndian.PutUint16(b[2:], 0)
			binary.BigEndian.PutUint16(b[2:], fold(onesSum(0, b)))
			return b
		}(), nil, false, true},
		{"bad checksum", corrupt, nil, false, true},
		{"short", []byte{igmpV2Report, 0, 0}, nil, false, true},
		{"unknown type", igmpMsg(0x30, group1), nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, query, err := parseIGMP(tc.msg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) && !tc.wantErr || query != tc.query {
				t.Errorf("changes %v query %v, want %v %v", got, query, tc.want, tc.query)
			}
		})
	}
}

// TestHandleIGMP: the igmp action reports the packet's logical port's
// changes on its switch; a query says a multicast router is behind the
// port; a non-IGMP packet is refused.
func TestHandleIGMP(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	st := testState()
	out, err := e.Handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpV2Report, group1), group1), 2, 33, nil), st)
	if err != nil {
		t.Fatal(err)
	}
	want := []IGMPReport{{Datapath: 2, Port: "sw0-p1", Group: group1, Join: true}}
	if !reflect.DeepEqual(out.IGMP, want) || len(out.Packets) != 0 {
		t.Errorf("reports %+v, %d packets; want %+v", out.IGMP, len(out.Packets), want)
	}
	out, err = e.Handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpQuery, netip.IPv4Unspecified()), netip.MustParseAddr("224.0.0.1")), 2, 33, nil), st)
	if want := []IGMPReport{{Datapath: 2, Port: "sw0-p1", Query: true}}; err != nil || !reflect.DeepEqual(out.IGMP, want) || len(out.Packets) != 0 {
		t.Errorf("query: %+v, %d packets, %v; want %+v: a multicast router behind the port", out.IGMP, len(out.Packets), err, want)
	}
	if _, err := e.Handle(packetIn("igmp;", udpFrame(routerMAC, vmIP, group1, 1, 2, nil), 2, 33, nil), st); err == nil {
		t.Errorf("a UDP packet was taken for IGMP")
	}
	if _, err := e.Handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpV2Report, group1), group1), 2, 33, map[int]uint64{14: 9}), st); err == nil {
		t.Errorf("a report from an unknown port was accepted")
	}
}

func TestSnooping(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cfg := McastConfig{Enabled: true, IdleTimeout: 300 * time.Second, TableSize: 2}
	type step struct {
		at      time.Duration // after t0
		report  *IGMPReport   // nil: expire
		changed bool
		want    map[McastGroup][]string
	}
	join := func(dp uint32, port string, g netip.Addr) *IGMPReport {
		return &IGMPReport{Datapath: dp, Port: port, Group: g, Join: true}
	}
	leave := func(dp uint32, port string, g netip.Addr) *IGMPReport {
		return &IGMPReport{Datapath: dp, Port: port, Group: g}
	}
	g1, g2 := McastGroup{2, group1}, McastGroup{2, group2}
	steps := []step{
		{0, join(2, "p1", group1), true, map[McastGroup][]string{g1: {"p1"}}},
		{0, join(2, "p1", group1), false, map[McastGroup][]string{g1: {"p1"}}},
		{10 * time.Second, join(2, "p2", group1), true, map[McastGroup][]string{g1: {"p1", "p2"}}},
		{10 * time.Second, join(2, "p3", group2), true, map[McastGroup][]string{g1: {"p1", "p2"}, g2: {"p3"}}},
		// A third group is past the table size.
		{10 * time.Second, join(2, "p3", netip.MustParseAddr("239.3.3.3")), false, map[McastGroup][]string{g1: {"p1", "p2"}, g2: {"p3"}}},
		{20 * time.Second, leave(2, "p3", group2), true, map[McastGroup][]string{g1: {"p1", "p2"}}},
		{20 * time.Second, leave(2, "p3", group2), false, map[McastGroup][]string{g1: {"p1", "p2"}}},
		// p1 reported at 0 and ends at 300 s; p2 at 10 s lasts until 310 s.
		{299 * time.Second, nil, false, map[McastGroup][]string{g1: {"p1", "p2"}}},
		{300 * time.Second, nil, true, map[McastGroup][]string{g1: {"p2"}}},
		{305 * time.Second, join(2, "p2", group1), false, map[McastGroup][]string{g1: {"p2"}}},
		{600 * time.Second, nil, false, map[McastGroup][]string{g1: {"p2"}}},
		{605 * time.Second, nil, true, map[McastGroup][]string{}},
	}
	s := NewSnooping()
	for i, st := range steps {
		now := t0.Add(st.at)
		var changed bool
		if st.report != nil {
			changed = s.Report(*st.report, cfg, now)
		} else {
			changed = s.Expire(now, func(uint32) McastConfig { return cfg })
		}
		if changed != st.changed {
			t.Errorf("step %d: changed %v, want %v", i, changed, st.changed)
		}
		if got := s.Groups(); !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d: groups %v, want %v", i, got, st.want)
		}
	}
}

// TestApplyIGMP: reports on a switch without snooping enabled are
// ignored; a change hands the writer one snapshot, the latest; every
// igmpResync the rows are checked again; expiry empties the membership.
func TestApplyIGMP(t *testing.T) {
	p, _ := newTestPinctrl(t, Config{})
	p.fixedState.Mcast = map[uint32]McastConfig{2: {}}
	now := time.Unix(1000, 0)
	p.handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpV2Report, group1), group1), 2, 33, nil), now)
	p.fixedState.Mcast[2] = McastConfig{Enabled: true}
	p.handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpV2Report, group1), group1), 2, 33, nil), now)
	p.handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpV2Report, group2), group2), 2, 33, nil), now)
	p.handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpV2Report, group2), group2), 2, 33, nil), now)
	if s := p.Stats().IGMP; s.Reports != 3 || s.Ignored != 1 {
		t.Errorf("igmp counters %+v, want 3 reports, 1 ignored", s)
	}
	if len(p.igmpSync) != 1 {
		t.Fatalf("%d snapshots waiting, want 1", len(p.igmpSync))
	}
	want := igmpSnapshot{{2, group1}: {"sw0-p1"}, {2, group2}: {"sw0-p1"}}
	if got := <-p.igmpSync; !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot %v, want %v", got, want)
	}
	p.tickIGMP(now.Add(time.Second))
	if len(p.igmpSync) != 0 {
		t.Errorf("a tick without changes sent a snapshot")
	}
	p.tickIGMP(now.Add(igmpResync)) // unchanged, but checked against the rows
	if got := <-p.igmpSync; !reflect.DeepEqual(got, want) {
		t.Errorf("resync snapshot %v, want %v", got, want)
	}
	p.tickIGMP(now.Add(301 * time.Second)) // the switch's default idle timeout: 300 s
	if got := <-p.igmpSync; len(got) != 0 {
		t.Errorf("after the idle timeout: %v", got)
	}
}

func TestIGMPCode(t *testing.T) {
	for _, tc := range []struct {
		n    time.Duration
		want byte
	}{{0, 0}, {10, 10}, {127, 127}, {128, 0x80}, {150, 0x82}, {1000, 0xaf}, {31744, 0xff}, {1 << 20, 0xff}} {
		got := igmpCode(tc.n)
		if got != tc.want {
			t.Errorf("igmpCode(%d) = %#x, want %#x", tc.n, got, tc.want)
		}
		// Decoding gives the value rounded down to what the code holds.
		dec := int64(got)
		if got >= 0x80 {
			dec = int64(got&0xf|0x10) << ((got>>4)&7 + 3)
		}
		if dec > int64(tc.n) || tc.n < 31744 && int64(tc.n)-dec >= dec/16+1 {
			t.Errorf("igmpCode(%d) = %#x decodes to %d", tc.n, got, dec)
		}
	}
}

func querierConfig() McastConfig {
	return McastConfig{Enabled: true, Querier: true, Local: true, EthSrc: routerMAC,
		IP4Src: netip.MustParseAddr("10.0.0.254"), IdleTimeout: 300 * time.Second,
		QueryInterval: 150 * time.Second, QueryMaxResp: time.Second}
}

// TestIGMPGeneralQuery: the query is an IGMPv3 general query the parser
// (and so a host) takes for one, from the configured addresses to
// 224.0.0.1 with TTL 1 and Router Alert.
func TestIGMPGeneralQuery(t *testing.T) {
	b := igmpGeneralQuery(querierConfig())
	f, err := parseFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.src.String() != routerMAC.String() || f.dst.String() != "01:00:5e:00:00:01" ||
		f.ipSrc.String() != "10.0.0.254" || f.ipDst != allHosts || f.ttl != 1 || f.proto != 2 {
		t.Errorf("query %s > %s, %s > %s, ttl %d proto %d", f.src, f.dst, f.ipSrc, f.ipDst, f.ttl, f.proto)
	}
	if fold(onesSum(0, f.ipHdr)) != 0 || !bytes.Equal(f.ipHdr[20:], []byte{0x94, 4, 0, 0}) {
		t.Errorf("IP header %x: bad checksum or no Router Alert", f.ipHdr)
	}
	changes, query, err := parseIGMP(f.l4)
	if err != nil || !query || len(changes) != 0 {
		t.Errorf("parsed as %v query %v err %v", changes, query, err)
	}
	if len(f.l4) != 12 || f.l4[1] != 10 || f.l4[8] != 2 || f.l4[9] != igmpCode(150) || !bytes.Equal(f.l4[4:8], []byte{0, 0, 0, 0}) {
		t.Errorf("IGMPv3 query %x: want max resp 10, QRV 2, QQIC 150, group 0", f.l4)
	}
}

// TestIGMPQuerySchedule: a querier switch queries at once and then every
// query interval; a switch that is not the querier, or has no port
// here, does not.
func TestIGMPQuerySchedule(t *testing.T) {
	p, sw := newTestPinctrl(t, Config{})
	p.fixedState.Datapaths[2].Ports["_MC_flood"] = 32768
	off := querierConfig()
	off.Local = false
	p.fixedState.Datapaths[3] = &Datapath{Key: 3, Ports: map[string]uint32{"_MC_flood": 32768}}
	p.fixedState.Mcast = map[uint32]McastConfig{2: querierConfig(), 3: off}
	t0 := time.Unix(1000, 0)
	for _, step := range []struct {
		at   time.Duration
		outs int
	}{{0, 1}, {time.Second, 1}, {149 * time.Second, 1}, {150 * time.Second, 2}, {151 * time.Second, 2}, {300 * time.Second, 3}} {
		p.tickIGMP(t0.Add(step.at))
		if sw.outs != step.outs {
			t.Errorf("at %v: %d queries sent, want %d", step.at, sw.outs, step.outs)
		}
	}
	if got := p.Stats().Kinds["igmp_query"]; got.Handled != 3 {
		t.Errorf("igmp_query counters %+v", got)
	}
}

var (
	vmLL      = netip.MustParseAddr("fe80::5054:ff:fe00:1")
	mldGroup  = netip.MustParseAddr("ff05::1:3")
	mldRouter = netip.MustParseAddr("ff02::16")
)

// mldMsg is an ICMPv6 MLD message from vmLL to dst (its checksum for
// that) of type typ: a v1 message about group, or a v2 report of
// records (IGMPv3's record types, 16-byte addresses).
func mldMsg(typ byte, dst, group netip.Addr, records ...[]byte) []byte {
	b := make([]byte, 8)
	b[0] = typ
	if typ == mldV2Report {
		binary.BigEndian.PutUint16(b[6:], uint16(len(records)))
		for _, r := range records {
			b = append(b, r...)
		}
	} else {
		b = append(b, group.AsSlice()...)
	}
	pkt := ipPacket(vmLL, dst, protoICMPv6, 1, b, 2)
	return pkt[40:]
}

func TestParseMLD(t *testing.T) {
	rec := func(typ byte, g netip.Addr, srcs int) []byte {
		r := append([]byte{typ, 0, 0, byte(srcs)}, g.AsSlice()...)
		for range srcs {
			r = append(r, vmIP6.AsSlice()...)
		}
		return r
	}
	bad := mldMsg(mldV1Report, mldGroup, mldGroup)
	bad[3]++
	for _, tc := range []struct {
		name    string
		msg     []byte
		dst     netip.Addr
		want    []groupChange
		query   bool
		wantErr bool
	}{
		{"v1 report", mldMsg(mldV1Report, mldGroup, mldGroup), mldGroup, []groupChange{{mldGroup, true}}, false, false},
		{"v1 done", mldMsg(mldV1Done, mldRouter, mldGroup), mldRouter, []groupChange{{mldGroup, false}}, false, false},
		{"query", mldMsg(mldQuery, allNodes, netip.IPv6Unspecified()), allNodes, nil, true, false},
		{"solicited-node group", mldMsg(mldV1Report, mldRouter, netip.MustParseAddr("ff02::1:ff00:1")), mldRouter, nil, false, false},
		{"v2 join, leave, include", mldMsg(mldV2Report, mldRouter, netip.Addr{},
			rec(igmpChangeToExclude, mldGroup, 0), rec(igmpChangeToInclude, group6b, 0), rec(igmpModeIsInclude, group6b, 1)),
			mldRouter, []groupChange{{mldGroup, true}, {group6b, false}, {group6b, true}}, false, false},
		{"v2 truncated", func() []byte {
			b := mldMsg(mldV2Report, mldRouter, netip.Addr{}, rec(igmpChangeToExclude, mldGroup, 1))
			b = b[:len(b)-4]
			binary.BigEndian.PutUint16(b[2:], 0)
			binary.BigEndian.PutUint16(b[2:], fold(onesSum(pseudoSum(vmLL, mldRouter, protoICMPv6, len(b)), b)))
			return b
		}(), mldRouter, nil, false, true},
		{"bad checksum", bad, mldGroup, nil, false, true},
		{"checksum for another destination", mldMsg(mldV1Report, mldGroup, mldGroup), mldRouter, nil, false, true},
		{"echo request", mldMsg(128, mldGroup, mldGroup), mldGroup, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, query, err := parseMLD(tc.msg, vmLL, tc.dst)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (!reflect.DeepEqual(got, tc.want) || query != tc.query) {
				t.Errorf("changes %v query %v, want %v %v", got, query, tc.want, tc.query)
			}
		})
	}
}

var group6b = netip.MustParseAddr("ff0e::42")

// TestHandleMLD: ovn-northd sends MLD to the igmp action too.
func TestHandleMLD(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	ip := ipPacket(vmLL, mldGroup, protoICMPv6, 1, mldMsg(mldV1Report, mldGroup, mldGroup), -1)
	out, err := e.Handle(packetIn("igmp;", ethFrame(multicastMAC(mldGroup), vmMAC, etherIPv6, ip), 2, 33, nil), testState())
	if err != nil {
		t.Fatal(err)
	}
	want := []IGMPReport{{Datapath: 2, Port: "sw0-p1", Group: mldGroup, Join: true}}
	if !reflect.DeepEqual(out.IGMP, want) {
		t.Errorf("reports %+v, want %+v", out.IGMP, want)
	}
}

// TestIGMPFloodReports: a report goes on to the switch's multicast
// routers (its _MC_mrouter_flood group), from the reporting port; a
// query does not.
func TestIGMPFloodReports(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	st := testState()
	st.Datapaths[2].Ports[mcMrouterFlood] = 32771
	report := igmpFrame(igmpMsg(igmpV2Report, group1), group1)
	out, err := e.Handle(packetIn("igmp;", report, 2, 33, nil), st)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Packets) != 1 || len(out.IGMP) != 1 {
		t.Fatalf("%d packets, %d reports; want 1, 1", len(out.Packets), len(out.IGMP))
	}
	po := out.Packets[0]
	if !bytes.Equal(po.Frame, report) || po.Table != e.layout.IngressOutput || po.Key.Get(flow.Reg0+15) != 32771 || po.Key.Get(flow.Reg0+14) != 1 {
		t.Errorf("forwarded to table %d outport %d inport %d", po.Table, po.Key.Get(flow.Reg0+15), po.Key.Get(flow.Reg0+14))
	}
	out, err = e.Handle(packetIn("igmp;", igmpFrame(igmpMsg(igmpQuery, netip.IPv4Unspecified()), allHosts), 2, 33, nil), st)
	if err != nil || len(out.Packets) != 0 {
		t.Errorf("query: %d packets, %v", len(out.Packets), err)
	}
}

// TestMLDGeneralQuery: the query is an MLDv2 general query the parser
// (and so a host) takes for one, from the configured addresses to
// ff02::1 with hop limit 1 behind a Hop-by-Hop Router Alert.
func TestMLDGeneralQuery(t *testing.T) {
	cfg := querierConfig()
	cfg.IP6Src = netip.MustParseAddr("fe80::ff:fe00:ff01")
	b := mldGeneralQuery(cfg)
	f, err := parseFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.src.String() != routerMAC.String() || f.dst.String() != "33:33:00:00:00:01" ||
		f.ipSrc != cfg.IP6Src || f.ipDst != allNodes || f.ttl != 1 || f.proto != protoICMPv6 {
		t.Errorf("query %s > %s, %s > %s, hop limit %d proto %d", f.src, f.dst, f.ipSrc, f.ipDst, f.ttl, f.proto)
	}
	if len(f.ipHdr) != 48 || f.ipHdr[6] != 0 || !bytes.Equal(f.ipHdr[42:46], []byte{5, 2, 0, 0}) {
		t.Errorf("IPv6 headers %x: want a Hop-by-Hop Router Alert (MLD)", f.ipHdr)
	}
	changes, query, err := parseMLD(f.l4, f.ipSrc, f.ipDst) // checks the checksum too
	if err != nil || !query || len(changes) != 0 {
		t.Errorf("parsed as %v query %v err %v", changes, query, err)
	}
	q := f.l4
	if len(q) != 28 || binary.BigEndian.Uint16(q[4:]) != 1000 || q[24] != 2 || q[25] != igmpCode(150) || !bytes.Equal(q[8:24], make([]byte, 16)) {
		t.Errorf("MLDv2 query %x: want max resp 1000 ms, QRV 2, QQIC 150, group ::", q)
	}
}

// TestMLDCode: RFC 3810 5.1.3's Maximum Response Code: exact below
// 32768 ms, else (mant | 0x1000) << (exp + 3) rounded down.
func TestMLDCode(t *testing.T) {
	for _, tc := range []struct {
		ms   time.Duration
		want uint16
	}{{0, 0}, {1000, 1000}, {32767, 32767}, {32768, 0x8000}, {65536, 0x9000}, {1 << 30, 0xffff}} {
		got := mldCode(tc.ms)
		if got != tc.want {
			t.Errorf("mldCode(%d) = %#x, want %#x", tc.ms, got, tc.want)
		}
		if got&0x8000 != 0 && got != 0xffff {
			if v := time.Duration(uint32(got&0xfff|0x1000) << ((got>>12)&7 + 3)); v > tc.ms || tc.ms-v >= time.Duration(1)<<((got>>12)&7+3) {
				t.Errorf("mldCode(%d) = %#x decodes to %d", tc.ms, got, v)
			}
		}
	}
}

// TestMLDQuerySchedule: a querier switch with ip6_src sends an MLD query
// with each IGMP one; with ip6_src only, MLD queries only.
func TestMLDQuerySchedule(t *testing.T) {
	p, sw := newTestPinctrl(t, Config{})
	p.fixedState.Datapaths[2].Ports["_MC_flood"] = 32768
	p.fixedState.Datapaths[3] = &Datapath{Key: 3, Ports: map[string]uint32{"_MC_flood": 32768}}
	both, v6 := querierConfig(), querierConfig()
	both.IP6Src = netip.MustParseAddr("fe80::1")
	v6.IP6Src, v6.IP4Src = netip.MustParseAddr("fe80::2"), netip.Addr{}
	p.fixedState.Mcast = map[uint32]McastConfig{2: both, 3: v6}
	t0 := time.Unix(1000, 0)
	p.tickIGMP(t0)
	p.tickIGMP(t0.Add(150 * time.Second))
	s := p.Stats().Kinds
	if s["igmp_query"].Handled != 2 || s["mld_query"].Handled != 4 || sw.outs != 6 {
		t.Errorf("igmp_query %+v, mld_query %+v, %d packets; want 2 IGMP and 4 MLD queries", s["igmp_query"], s["mld_query"], sw.outs)
	}
}

// TestSnoopingConfigure: as ovn-controller does, a switch's memberships
// end when its IP_Multicast seq_no changes (ovn-sbctl
// ip-multicast-flush), when its snooping is disabled and when its row
// goes; the first configuration and an unchanged one end nothing.
func TestSnoopingConfigure(t *testing.T) {
	now := time.Unix(1000, 0)
	join := func(s *Snooping, dp uint32, g netip.Addr) {
		s.Report(IGMPReport{Datapath: dp, Port: "p", Group: g, Join: true}, McastConfig{Enabled: true}, now)
	}
	on := func(seq int64) McastConfig { return McastConfig{Enabled: true, SeqNo: seq} }
	for _, tc := range []struct {
		name    string
		next    map[uint32]McastConfig
		changed bool
		want    []McastGroup // left
	}{
		{"unchanged", map[uint32]McastConfig{2: on(5), 3: on(0)}, false, []McastGroup{{2, group1}, {3, group2}}},
		{"flushed", map[uint32]McastConfig{2: on(6), 3: on(0)}, true, []McastGroup{{3, group2}}},
		{"disabled", map[uint32]McastConfig{2: on(5), 3: {}}, true, []McastGroup{{2, group1}}},
		{"row gone", map[uint32]McastConfig{2: on(5)}, true, []McastGroup{{2, group1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnooping()
			if s.Configure(map[uint32]McastConfig{2: on(5), 3: on(0)}) {
				t.Error("the first configuration ended memberships that were not there")
			}
			join(s, 2, group1)
			join(s, 3, group2)
			if got := s.Configure(tc.next); got != tc.changed {
				t.Errorf("changed %v, want %v", got, tc.changed)
			}
			var left []McastGroup
			for g := range s.Groups() {
				left = append(left, g)
			}
			slices.SortFunc(left, func(a, b McastGroup) int { return int(a.Datapath) - int(b.Datapath) })
			if !slices.Equal(left, tc.want) {
				t.Errorf("groups left %v, want %v", left, tc.want)
			}
		})
	}
}

// TestQueriesStayLocal: a query starts in the local output table with the
// switch's flood group as outport, as ovn-controller's (local only) do:
// it reaches this chassis' ports of the switch, and no tunnel.
func TestQueriesStayLocal(t *testing.T) {
	sw := &recordingSwitch{}
	p, err := New(Config{Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	p.fixedState = testState()
	p.fixedState.Datapaths[2].Ports["_MC_flood"] = 32768
	cfg := querierConfig()
	cfg.IP6Src = netip.MustParseAddr("fe80::1")
	p.fixedState.Mcast = map[uint32]McastConfig{2: cfg}
	p.tickIGMP(time.Unix(1000, 0))
	if len(sw.pos) != 2 {
		t.Fatalf("%d packet-outs, want an IGMP and an MLD query", len(sw.pos))
	}
	for _, po := range sw.pos {
		if po.Table != localOutputTable || po.Actions != nil || po.Key.Get(flow.Metadata) != 2 || po.Key.Get(flow.Reg0+15) != 32768 {
			t.Errorf("query enters table %d (actions %v) with metadata %d outport %d, want table %d, switch 2, outport 32768",
				po.Table, po.Actions, po.Key.Get(flow.Metadata), po.Key.Get(flow.Reg0+15), localOutputTable)
		}
	}
}

// TestSnoopingMrouters: a switch snooping with a port here has a group of
// multicast routers (the invalid address: IGMP_Group "mrouters"), empty
// until a port sends a query; the port stays in it for MrouterIdle after
// its last query; a flush empties it.
func TestSnoopingMrouters(t *testing.T) {
	s := NewSnooping()
	t0 := time.Unix(1000, 0)
	cfg := McastConfig{Enabled: true, Local: true, SeqNo: 1}
	if !s.Configure(map[uint32]McastConfig{2: cfg, 3: {Enabled: true}}) {
		t.Error("a switch snooping here is a change (its mrouters row)")
	}
	mr := McastGroup{Datapath: 2}
	check := func(when string, want map[McastGroup][]string) {
		t.Helper()
		if got := s.Groups(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", when, got, want)
		}
	}
	check("at first", map[McastGroup][]string{mr: {}})
	if !s.Report(IGMPReport{Datapath: 2, Port: "r1", Query: true}, cfg, t0) {
		t.Error("a first query is a change")
	}
	if s.Report(IGMPReport{Datapath: 2, Port: "r1", Query: true}, cfg, t0.Add(time.Minute)) {
		t.Error("a query again is no change")
	}
	check("after a query", map[McastGroup][]string{mr: {"r1"}})
	if s.Expire(t0.Add(time.Minute+MrouterIdle-time.Second), func(uint32) McastConfig { return cfg }) {
		t.Error("expired before MrouterIdle after the last query")
	}
	if !s.Expire(t0.Add(time.Minute+MrouterIdle), func(uint32) McastConfig { return cfg }) {
		t.Error("not expired MrouterIdle after the last query")
	}
	check("expired", map[McastGroup][]string{mr: {}})
	s.Report(IGMPReport{Datapath: 2, Port: "r1", Query: true}, cfg, t0)
	cfg.SeqNo++
	if !s.Configure(map[uint32]McastConfig{2: cfg}) {
		t.Error("a flush with a router is a change")
	}
	check("flushed", map[McastGroup][]string{mr: {}})
	if !s.Configure(map[uint32]McastConfig{}) {
		t.Error("the switch leaving is a change")
	}
	check("no switch", map[McastGroup][]string{})
}
