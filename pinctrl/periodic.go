package pinctrl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
)

var allNodes = netip.MustParseAddr("ff02::1")

// periodicRA is the unsolicited router advertisement of an RA port, as
// the packet-out that enters its peer switch's ingress pipeline from the
// router's port there (and so reaches every port of the switch).
func (e *Engine) periodicRA(p RAPort) (dp.PacketOut, error) {
	o := p.Options
	mac, err := net.ParseMAC(o["ipv6_ra_src_eth"])
	if err != nil || len(mac) != 6 {
		return dp.PacketOut{}, fmt.Errorf("%s: bad ipv6_ra_src_eth %q", p.Name, o["ipv6_ra_src_eth"])
	}
	src, err := netip.ParseAddr(o["ipv6_ra_src_addr"])
	if err != nil || !src.Is6() {
		return dp.PacketOut{}, fmt.Errorf("%s: bad ipv6_ra_src_addr %q", p.Name, o["ipv6_ra_src_addr"])
	}
	ra := raOptions{mode: o["ipv6_ra_address_mode"], preference: o["ipv6_ra_prf"], slla: mac,
		dnssl: o["ipv6_ra_dnssl"], routeInfo: o["ipv6_ra_route_info"]}
	if m := o["ipv6_ra_mtu"]; m != "" {
		v, err := strconv.ParseUint(m, 10, 32)
		if err != nil {
			return dp.PacketOut{}, fmt.Errorf("%s: bad ipv6_ra_mtu %q", p.Name, m)
		}
		ra.mtu = uint32(v)
	}
	for _, s := range strings.Fields(o["ipv6_ra_prefixes"]) {
		pf, err := netip.ParsePrefix(s)
		if err != nil || !pf.Addr().Is6() {
			return dp.PacketOut{}, fmt.Errorf("%s: bad prefix %q", p.Name, s)
		}
		ra.prefixes = append(ra.prefixes, pf)
	}
	for _, s := range strings.Fields(o["ipv6_ra_rdnss"]) {
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
			ra.rdnss = append(ra.rdnss, a)
		}
	}
	icmp, err := routerAdvertisement(ra)
	if err != nil {
		return dp.PacketOut{}, fmt.Errorf("%s: %w", p.Name, err)
	}
	f := &frame{}
	frame := append(f.ethHeader(multicastMAC(allNodes), mac, etherIPv6), ipPacket(src, allNodes, protoICMPv6, 255, icmp, 2)...)
	var k flow.Key
	k.Set(flow.Metadata, uint64(p.Switch))
	k.Set(flow.Reg0+14, uint64(p.PeerKey)) // inport
	return dp.PacketOut{Frame: frame, Key: k, Table: e.layout.IngressBase}, nil
}

// raInterval is the time to the next periodic advertisement of p: between
// ipv6_ra_min_interval and ipv6_ra_max_interval seconds (defaults 200
// and 600, as ovn-northd writes them), spread by a hash of the port and
// the count sent so that ports do not advertise in step (RFC 4861 6.2.4
// asks for randomness; a hash keeps runs repeatable).
func raInterval(p RAPort, sent uint64) (time.Duration, error) {
	lo, err1 := strconv.Atoi(cmpOr(p.Options["ipv6_ra_min_interval"], "200"))
	hi, err2 := strconv.Atoi(cmpOr(p.Options["ipv6_ra_max_interval"], "600"))
	if err := errors.Join(err1, err2); err != nil || lo < 1 || hi < lo {
		return 0, fmt.Errorf("%s: bad RA intervals %q, %q", p.Name, p.Options["ipv6_ra_min_interval"], p.Options["ipv6_ra_max_interval"])
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", p.Name, sent)
	return time.Duration(lo)*time.Second + time.Duration(h.Sum64()%uint64((hi-lo)*1000+1))*time.Millisecond, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// garpBackoff is how the announcements of an address repeat: at once,
// then after intervals doubling from 1 s to 16 s, then no more until the
// address or its port changes (OVN 23.03's default, garp_max_timeout_sec
// unset).
const (
	garpFirstInterval = time.Second
	garpLastInterval  = 16 * time.Second
)

// garps are the gratuitous ARPs (ARP requests for the address itself,
// from its MAC) of an announcement, one per address and localnet port,
// entering the switch's output stage towards the localnet port.
func (e *Engine) garps(a Announcement) []dp.PacketOut {
	var out []dp.PacketOut
	for _, ip := range a.IPs {
		arp := make([]byte, 28)
		binary.BigEndian.PutUint16(arp[0:], 1)
		binary.BigEndian.PutUint16(arp[2:], etherIPv4)
		arp[4], arp[5] = 6, 4
		binary.BigEndian.PutUint16(arp[6:], 1)
		copy(arp[8:], a.MAC)
		copy(arp[14:], ip.AsSlice())
		copy(arp[24:], ip.AsSlice())
		f := &frame{}
		pkt := append(f.ethHeader(broadcastMAC, a.MAC, etherARP), arp...)
		for _, ln := range a.Localnet {
			var k flow.Key
			k.Set(flow.Metadata, uint64(a.Switch))
			k.Set(flow.Reg0+15, uint64(ln)) // outport
			out = append(out, dp.PacketOut{Frame: pkt, Key: k, Table: e.layout.IngressOutput, Actions: nil})
		}
	}
	return out
}
