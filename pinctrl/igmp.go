package pinctrl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// IGMP message types (RFC 1112, RFC 2236, RFC 3376).
const (
	igmpQuery    = 0x11
	igmpV1Report = 0x12
	igmpV2Report = 0x16
	igmpV2Leave  = 0x17
	igmpV3Report = 0x22
)

// IGMPv3 group record types (RFC 3376 4.2.12).
const (
	igmpModeIsInclude   = 1
	igmpModeIsExclude   = 2
	igmpChangeToInclude = 3
	igmpChangeToExclude = 4
	igmpAllowNew        = 5
	igmpBlockOld        = 6
)

// groupChange is what one report says of one group: the host joins it
// (or is still in it) or leaves it.
type groupChange struct {
	Group netip.Addr
	Join  bool
}

// parseIGMP reads an IGMP message (the IPv4 payload) and returns the
// membership changes it reports. A query reports none. Snooping keeps no
// per-source state (as ovn-controller does not): every v3 record joins
// its group (or refreshes the membership), BLOCK_OLD_SOURCES included as
// in ovn-controller, except an INCLUDE of no sources (RFC 3376's way to
// leave), which leaves it; records of unknown types are skipped.
// Link-local groups (224.0.0.0/24) are always flooded, so they are left
// out.
func parseIGMP(b []byte) (changes []groupChange, query bool, err error) {
	if len(b) < 8 {
		return nil, false, errTruncated
	}
	if fold(onesSum(0, b)) != 0 {
		return nil, false, errors.New("bad IGMP checksum")
	}
	add := func(g [4]byte, join bool) {
		a := netip.AddrFrom4(g)
		if a.IsMulticast() && !a.IsLinkLocalMulticast() {
			changes = append(changes, groupChange{a, join})
		}
	}
	switch b[0] {
	case igmpQuery:
		return nil, true, nil
	case igmpV1Report, igmpV2Report:
		add([4]byte(b[4:8]), true)
	case igmpV2Leave:
		add([4]byte(b[4:8]), false)
	case igmpV3Report:
		n := int(binary.BigEndian.Uint16(b[6:]))
		p := 8
		for i := range n {
			if len(b) < p+8 {
				return nil, false, fmt.Errorf("IGMPv3 record %d: %w", i, errTruncated)
			}
			typ, aux, srcs := b[p], int(b[p+1]), int(binary.BigEndian.Uint16(b[p+2:]))
			g := [4]byte(b[p+4 : p+8])
			p += 8 + 4*srcs + 4*aux
			if len(b) < p {
				return nil, false, fmt.Errorf("IGMPv3 record %d: %w", i, errTruncated)
			}
			switch typ {
			case igmpModeIsInclude, igmpChangeToInclude:
				add(g, srcs > 0)
			case igmpModeIsExclude, igmpChangeToExclude, igmpAllowNew, igmpBlockOld:
				add(g, true)
			default:
				// RFC 3376 4.2.12: unknown record types are ignored.
			}
		}
	default:
		return nil, false, fmt.Errorf("IGMP message type %#x is not a report", b[0])
	}
	return changes, false, nil
}

// MLD message types (RFC 2710, RFC 3810) and MLDv2 record types, which
// are IGMPv3's.
const (
	mldQuery    = 130
	mldV1Report = 131
	mldV1Done   = 132
	mldV2Report = 143
)

// parseMLD reads an MLD message (the ICMPv6 message from src to dst) as
// parseIGMP does an IGMP one. Groups of link-local scope or less
// (ff02::1:ff00:0/104 of neighbor discovery among them) are flooded, so
// they are left out.
func parseMLD(b []byte, src, dst netip.Addr) (changes []groupChange, query bool, err error) {
	if len(b) < 8 {
		return nil, false, errTruncated
	}
	if fold(onesSum(pseudoSum(src, dst, protoICMPv6, len(b)), b)) != 0 {
		return nil, false, errors.New("bad MLD checksum")
	}
	add := func(g []byte, join bool) {
		a := netip.AddrFrom16([16]byte(g))
		if a.IsMulticast() && g[1]&0x0f > 2 {
			changes = append(changes, groupChange{a, join})
		}
	}
	switch b[0] {
	case mldQuery:
		// A query from :: (RFC 3810 5.1.14: a host's) is no router's.
		return nil, src.IsValid() && !src.IsUnspecified(), nil
	case mldV1Report, mldV1Done:
		if len(b) < 24 {
			return nil, false, errTruncated
		}
		add(b[8:24], b[0] == mldV1Report)
	case mldV2Report:
		n := int(binary.BigEndian.Uint16(b[6:]))
		p := 8
		for i := range n {
			if len(b) < p+20 {
				return nil, false, fmt.Errorf("MLDv2 record %d: %w", i, errTruncated)
			}
			typ, aux, srcs := b[p], int(b[p+1]), int(binary.BigEndian.Uint16(b[p+2:]))
			g := b[p+4 : p+20]
			p += 20 + 16*srcs + 4*aux
			if len(b) < p {
				return nil, false, fmt.Errorf("MLDv2 record %d: %w", i, errTruncated)
			}
			switch typ {
			case igmpModeIsInclude, igmpChangeToInclude:
				add(g, srcs > 0)
			case igmpModeIsExclude, igmpChangeToExclude, igmpAllowNew, igmpBlockOld:
				add(g, true)
			}
		}
	default:
		return nil, false, fmt.Errorf("ICMPv6 type %d is not an MLD report", b[0])
	}
	return changes, false, nil
}

// IGMPReport is one port's report of one group, from an igmp action;
// with Query, the port sent a query instead: a multicast router is
// behind it (Group and Join unset).
type IGMPReport struct {
	Datapath uint32 // the switch's tunnel key
	Port     string // the logical port that reported
	Group    netip.Addr
	Join     bool
	Query    bool
}

// igmp runs the igmp action (ovn-northd's for IGMP and MLD alike): the
// reports of the packet's port.
func (h *handling) igmp() error {
	var parse func() ([]groupChange, bool, error)
	switch {
	case h.f == nil || h.f.fragment:
		return errors.New("igmp: not an IGMP or MLD packet")
	case h.f.etype == etherIPv4 && h.f.proto == 2:
		parse = func() ([]groupChange, bool, error) { return parseIGMP(h.f.l4) }
	case h.f.etype == etherIPv6 && h.f.proto == protoICMPv6:
		parse = func() ([]groupChange, bool, error) { return parseMLD(h.f.l4, h.f.ipSrc, h.f.ipDst) }
	default:
		return errors.New("igmp: not an IGMP or MLD packet")
	}
	port, ok := h.dp.PortNames[uint32(h.pi.Key.Get(flow.Reg0+14))]
	if !ok {
		return fmt.Errorf("igmp: unknown logical port %d", h.pi.Key.Get(flow.Reg0+14))
	}
	changes, query, err := parse()
	if err != nil {
		return fmt.Errorf("igmp: %w", err)
	}
	if query {
		// Another querier's: a multicast router is behind the port, as
		// ovn-controller learns (its IGMP_Group "mrouters"); the query
		// itself goes no further.
		h.out.IGMP = append(h.out.IGMP, IGMPReport{Datapath: h.dp.Key, Port: port, Query: true})
		return nil
	}
	for _, c := range changes {
		h.out.IGMP = append(h.out.IGMP, IGMPReport{Datapath: h.dp.Key, Port: port, Group: c.Group, Join: c.Join})
	}
	// The switch's multicast routers (ports with
	// options:mcast_flood_reports, relaying routers' ports: ovn-northd
	// 23.03's _MC_mrouter_flood) get every report to learn from.
	if mrouters, ok := h.dp.Ports[mcMrouterFlood]; ok {
		k := h.pi.Key
		k.Set(flow.Reg0+15, uint64(mrouters)) // outport
		h.out.Packets = append(h.out.Packets, dp.PacketOut{Frame: h.pi.Frame, Key: k, Table: h.e.layout.IngressOutput})
	}
	return nil
}

// mcMrouterFlood is the multicast group of a switch's multicast routers.
const mcMrouterFlood = "_MC_mrouter_flood"

// McastConfig is a snooping switch's IP_Multicast row, as pinctrl uses it.
type McastConfig struct {
	Enabled     bool
	IdleTimeout time.Duration // a membership not reported again for this long ends
	TableSize   int           // at most this many groups on the switch

	// The switch is the querier when Querier is set with EthSrc, and it
	// has a port bound here: it sends a general query every
	// QueryInterval, asking for answers within QueryMaxResp — an IGMP
	// one from IP4Src if set, an MLD one from IP6Src if set.
	Querier       bool
	EthSrc        net.HardwareAddr
	IP4Src        netip.Addr
	IP6Src        netip.Addr
	QueryInterval time.Duration
	QueryMaxResp  time.Duration
	Local         bool

	// SeqNo is the row's seq_no: a change (ovn-sbctl ip-multicast-flush)
	// flushes what the switch's snooping learned.
	SeqNo int64
}

// Defaults of ovn-nb(5)'s mcast_idle_timeout and mcast_table_size.
const (
	defaultMcastIdle  = 300 * time.Second
	defaultMcastTable = 2048
)

// McastGroup names one multicast group of a switch.
type McastGroup struct {
	Datapath uint32
	Group    netip.Addr
}

// Snooping is the group membership of this chassis' ports that IGMP
// reports taught: pure, driven by reports and the clock. It is not safe
// for concurrent use.
type Snooping struct {
	// members: when each port of a group reported it last.
	members map[McastGroup]map[string]time.Time
	// mrouters: when each port of a switch sent a query last.
	mrouters map[uint32]map[string]time.Time
	// seqNo: each switch's IP_Multicast seq_no when last configured;
	// here the switches snooping with a port on this chassis.
	seqNo map[uint32]int64
	here  map[uint32]bool
}

// MrouterIdle is how long a port stays a multicast router's after its
// last query (Open vSwitch's snooping table's, which ovn-controller
// uses).
const MrouterIdle = 180 * time.Second

// NewSnooping returns a Snooping without members.
func NewSnooping() *Snooping {
	return &Snooping{members: map[McastGroup]map[string]time.Time{}, mrouters: map[uint32]map[string]time.Time{},
		seqNo: map[uint32]int64{}, here: map[uint32]bool{}}
}

// Configure takes the switches' configurations: on a switch whose seq_no
// changed since the last call, every membership ends (as ovn-controller
// flushes its groups), and so they do on a switch whose snooping is no
// longer enabled or configured. It says whether any membership ended.
//
// The switches snooping with a port here each have a row of multicast
// routers (see Groups), which Configure reports as a change when one
// comes or goes.
func (s *Snooping) Configure(cfgs map[uint32]McastConfig) bool {
	changed := false
	flushed := func(dp uint32) bool {
		cfg, ok := cfgs[dp]
		prev, seen := s.seqNo[dp]
		return !ok || !cfg.Enabled || seen && prev != cfg.SeqNo
	}
	for k := range s.members {
		if flushed(k.Datapath) {
			delete(s.members, k)
			changed = true
		}
	}
	for dp := range s.mrouters {
		if flushed(dp) {
			delete(s.mrouters, dp)
			changed = true
		}
	}
	clear(s.seqNo)
	here := make(map[uint32]bool, len(cfgs))
	for dp, cfg := range cfgs {
		s.seqNo[dp] = cfg.SeqNo
		if cfg.Enabled && cfg.Local {
			here[dp] = true
			changed = changed || !s.here[dp]
		}
	}
	for dp := range s.here {
		changed = changed || !here[dp]
	}
	s.here = here
	return changed
}

// Report applies a report received at now, on a switch configured as
// cfg; it says whether the members of a group changed (a join that only
// refreshes does not). A new group beyond the switch's table size is
// dropped.
func (s *Snooping) Report(r IGMPReport, cfg McastConfig, now time.Time) bool {
	if r.Query {
		m := s.mrouters[r.Datapath]
		if m == nil {
			m = map[string]time.Time{}
			s.mrouters[r.Datapath] = m
		}
		_, had := m[r.Port]
		m[r.Port] = now
		return !had
	}
	k := McastGroup{r.Datapath, r.Group}
	m := s.members[k]
	if !r.Join {
		if _, ok := m[r.Port]; !ok {
			return false
		}
		delete(m, r.Port)
		if len(m) == 0 {
			delete(s.members, k)
		}
		return true
	}
	if m == nil {
		limit := cfg.TableSize
		if limit <= 0 {
			limit = defaultMcastTable
		}
		n := 0
		for g := range s.members {
			if g.Datapath == r.Datapath {
				n++
			}
		}
		if n >= limit {
			return false
		}
		m = map[string]time.Time{}
		s.members[k] = m
	}
	_, had := m[r.Port]
	m[r.Port] = now
	return !had
}

// Expire ends the memberships not reported for their switch's idle
// timeout (cfg returns a switch's configuration); it says whether any
// ended.
func (s *Snooping) Expire(now time.Time, cfg func(datapath uint32) McastConfig) bool {
	changed := false
	for k, m := range s.members {
		idle := cfg(k.Datapath).IdleTimeout
		if idle <= 0 {
			idle = defaultMcastIdle
		}
		for port, last := range m {
			if now.Sub(last) >= idle {
				delete(m, port)
				changed = true
			}
		}
		if len(m) == 0 {
			delete(s.members, k)
		}
	}
	for dp, m := range s.mrouters {
		for port, last := range m {
			if now.Sub(last) >= MrouterIdle {
				delete(m, port)
				changed = true
			}
		}
		if len(m) == 0 {
			delete(s.mrouters, dp)
		}
	}
	return changed
}

// Groups returns each group's member ports, sorted; and for each switch
// snooping with a port here (as last configured) the group of its
// multicast routers, under the invalid netip.Addr, which is there even
// without a port (ovn-controller's IGMP_Group "mrouters" is too).
func (s *Snooping) Groups() map[McastGroup][]string {
	out := make(map[McastGroup][]string, len(s.members)+len(s.here))
	sorted := func(m map[string]time.Time) []string {
		ports := make([]string, 0, len(m))
		for p := range m {
			ports = append(ports, p)
		}
		slices.Sort(ports)
		return ports
	}
	for k, m := range s.members {
		out[k] = sorted(m)
	}
	for dp := range s.here {
		out[McastGroup{Datapath: dp}] = sorted(s.mrouters[dp])
	}
	return out
}

// mroutersAddress is the IGMP_Group address of a switch's multicast
// routers.
const mroutersAddress = "mrouters"

// mcastConfigs reads the IP_Multicast rows of the switches in byUUID;
// local names the datapaths with a port bound to this chassis.
func mcastConfigs(c *client.Cache, byUUID map[ovsdb.UUID]*Datapath, local map[ovsdb.UUID]bool) map[uint32]McastConfig {
	out := map[uint32]McastConfig{}
	for _, m := range client.List[sb.IPMulticast](c) {
		sw := byUUID[m.Datapath]
		if sw == nil {
			continue
		}
		cfg := McastConfig{Enabled: m.Enabled != nil && *m.Enabled, IdleTimeout: defaultMcastIdle, TableSize: defaultMcastTable}
		if m.IdleTimeout != nil && *m.IdleTimeout > 0 {
			cfg.IdleTimeout = time.Duration(*m.IdleTimeout) * time.Second
		}
		if m.TableSize != nil && *m.TableSize > 0 {
			cfg.TableSize = int(*m.TableSize)
		}
		cfg.Local = local[m.Datapath]
		cfg.SeqNo = m.SeqNo
		cfg.Querier = m.Querier != nil && *m.Querier
		if mac, err := net.ParseMAC(m.EthSrc); err == nil && len(mac) == 6 {
			cfg.EthSrc = mac
		}
		if ip, err := netip.ParseAddr(m.IP4Src); err == nil && ip.Is4() {
			cfg.IP4Src = ip
		}
		if ip, err := netip.ParseAddr(m.IP6Src); err == nil && ip.Is6() && !ip.Is4In6() {
			cfg.IP6Src = ip
		}
		cfg.QueryInterval = cfg.IdleTimeout / 2
		if m.QueryInterval != nil && *m.QueryInterval > 0 {
			cfg.QueryInterval = time.Duration(*m.QueryInterval) * time.Second
		}
		cfg.QueryMaxResp = time.Second
		if m.QueryMaxResp != nil && *m.QueryMaxResp > 0 {
			cfg.QueryMaxResp = time.Duration(*m.QueryMaxResp) * time.Second
		}
		out[sw.Key] = cfg
	}
	return out
}

// queries reports whether the switch sends IGMP queries from here.
func (c McastConfig) queries() bool {
	return c.Enabled && c.Querier && c.Local && c.EthSrc != nil && c.IP4Src.IsValid()
}

// mldQueries reports whether the switch sends MLD queries from here.
func (c McastConfig) mldQueries() bool {
	return c.Enabled && c.Querier && c.Local && c.EthSrc != nil && c.IP6Src.IsValid()
}

// mldGeneralQuery is an MLDv2 general query from the switch cfg
// configures (RFC 3810 5.1): to ff02::1 with hop limit 1 and a
// Hop-by-Hop Router Alert option (RFC 2711, value 0: MLD), the
// robustness variable 2, the query interval in QQIC.
func mldGeneralQuery(cfg McastConfig) []byte {
	q := make([]byte, 28)
	q[0] = mldQuery
	binary.BigEndian.PutUint16(q[4:], mldCode(cfg.QueryMaxResp/time.Millisecond))
	q[24] = 2 // S = 0, QRV = 2
	q[25] = igmpCode(cfg.QueryInterval / time.Second)
	binary.BigEndian.PutUint16(q[2:], fold(onesSum(pseudoSum(cfg.IP6Src, allNodes, protoICMPv6, len(q)), q)))
	h := make([]byte, 48, 48+len(q))
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(8+len(q)))
	h[6], h[7] = 0, 1 // Hop-by-Hop options next; hop limit 1
	copy(h[8:], cfg.IP6Src.AsSlice())
	copy(h[24:], allNodes.AsSlice())
	// Hop-by-Hop: ICMPv6 next, 8 bytes: Router Alert (MLD), PadN.
	copy(h[40:], []byte{protoICMPv6, 0, 5, 2, 0, 0, 1, 0})
	mac := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	f := &frame{}
	return append(append(f.ethHeader(mac, cfg.EthSrc, etherIPv6), h...), q...)
}

// mldCode encodes n milliseconds as MLDv2's Maximum Response Code
// (RFC 3810 5.1.3): a 12-bit mantissa.
func mldCode(n time.Duration) uint16 { return floatCode(int64(n), 12) }

// allHosts is where general queries go (RFC 3376 4.1.12).
var allHosts = netip.MustParseAddr("224.0.0.1")

// igmpGeneralQuery is an IGMPv3 general query from the switch cfg
// configures (RFC 3376 4.1): to 224.0.0.1 with TTL 1 and the Router
// Alert option, the robustness variable 2, the query interval in QQIC.
func igmpGeneralQuery(cfg McastConfig) []byte {
	q := make([]byte, 12)
	q[0] = igmpQuery
	q[1] = igmpCode(cfg.QueryMaxResp / (100 * time.Millisecond))
	q[8] = 2 // S = 0, QRV = 2
	q[9] = igmpCode(cfg.QueryInterval / time.Second)
	binary.BigEndian.PutUint16(q[2:], fold(onesSum(0, q)))
	h := make([]byte, 24, 24+len(q))
	h[0] = 0x46 // IPv4, 6 words: the Router Alert option follows
	h[1] = 0xc0 // DSCP CS6 (internetwork control), as hosts expect of queries
	binary.BigEndian.PutUint16(h[2:], uint16(len(h)+len(q)))
	h[8], h[9] = 1, 2
	copy(h[12:], cfg.IP4Src.AsSlice())
	copy(h[16:], allHosts.AsSlice())
	copy(h[20:], []byte{0x94, 0x04, 0, 0}) // Router Alert (RFC 2113)
	binary.BigEndian.PutUint16(h[10:], fold(onesSum(0, h)))
	mac := net.HardwareAddr{0x01, 0x00, 0x5e, 0, 0, 1}
	f := &frame{}
	return append(append(f.ethHeader(mac, cfg.EthSrc, etherIPv4), h...), q...)
}

// igmpCode encodes n (tenths of a second for Max Resp Code, seconds for
// QQIC) as RFC 3376 4.1.1 and 4.1.7 do: a 4-bit mantissa.
func igmpCode(n time.Duration) byte { return byte(floatCode(int64(n), 4)) }

// floatCode is the code IGMPv3 and MLDv2 give a time: v as is below
// 1<<(m+3), else a 1 bit, a 3-bit exponent and an m-bit mantissa that
// stand for (1<<m | mant) << (exp+3); too large a v saturates.
func floatCode(v int64, m uint) uint16 {
	if v < 1<<(m+3) {
		return uint16(max(v, 0))
	}
	for exp := range 8 {
		mant := v>>(exp+3) - 1<<m
		if mant < 1<<m {
			return 1<<(m+3) | uint16(exp)<<m | uint16(mant)
		}
	}
	return 1<<(m+4) - 1
}
