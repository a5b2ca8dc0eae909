package conntrack

import (
	"encoding/binary"
	"hash/crc32"
)

// maxNATTries bounds the candidate tuples one commit tries before it gives
// up with ReasonNATExhausted.
const maxNATTries = 1 << 17

// hasPorts reports whether the protocol's key carries transport ports.
func hasPorts(proto uint8) bool {
	return proto == protoTCP || proto == protoUDP || proto == protoSCTP
}

// lbHash hashes the chosen fields of k. It is deterministic (no per-process
// seed), so a backend or NAT port choice is reproducible across restarts and
// in tests.
func lbHash(k *key, f HashFields) uint64 {
	if f == 0 {
		f = Hash5Tuple
	}
	h := uint64(0x243f6a8885a308d3)
	if f&HashSrcAddr != 0 {
		h = mix(mix(h, binary.BigEndian.Uint64(k.src[:8])), binary.BigEndian.Uint64(k.src[8:]))
	}
	if f&HashDstAddr != 0 {
		h = mix(mix(h, binary.BigEndian.Uint64(k.dst[:8])), binary.BigEndian.Uint64(k.dst[8:]))
	}
	var ports uint64
	if f&HashSrcPort != 0 {
		ports |= uint64(k.sport) << 16
	}
	if f&HashDstPort != 0 {
		ports |= uint64(k.dport)
	}
	if f&HashProto != 0 {
		ports |= uint64(k.proto) << 32
	}
	return mix(h, ports)
}

// mix folds v into h (a multiply-xorshift round, as in splitmix64).
func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>29
}

// addrSpan is an address range as a base and a count.
type addrSpan struct {
	base [16]byte
	n    uint64
}

func spanOf(r *NATRange, v6 bool) (addrSpan, bool) {
	lo, hi := r.MinAddr, r.MaxAddr
	if !hi.IsValid() {
		hi = lo
	}
	if !lo.IsValid() || lo.Is4() == v6 || hi.Is4() == v6 || hi.Less(lo) {
		return addrSpan{}, false
	}
	a, b := lo.As16(), hi.As16()
	n := uint64(1 << 32)
	if [8]byte(a[:8]) == [8]byte(b[:8]) {
		n = min(binary.BigEndian.Uint64(b[8:])-binary.BigEndian.Uint64(a[8:])+1, 1<<32)
		if n == 0 {
			n = 1 << 32
		}
	}
	return addrSpan{base: a, n: n}, true
}

func (s addrSpan) at(i uint64) [16]byte {
	a := s.base
	binary.BigEndian.PutUint64(a[8:], binary.BigEndian.Uint64(a[8:])+i%s.n)
	return a
}

// portSpan returns the ports to try: the range, or for MinPort 0 the
// packet's own port followed by the ephemeral ports (when fallback is set).
func portSpan(r *NATRange, own uint16, fallback bool) (lo uint16, n uint32, keepFirst bool) {
	if r.MinPort != 0 {
		hi := max(r.MaxPort, r.MinPort)
		return r.MinPort, uint32(hi-r.MinPort) + 1, false
	}
	if fallback {
		return 1024, 65536 - 1024, true
	}
	return own, 1, false
}

// natSetup chooses the reply tuple of a new connection being committed with
// NAT or LB, free of collisions in the zone. The caller holds z.mu for
// writing.
func (t *Tracker) natSetup(z *zone, pk *packet, p *Params, reply key) (key, uint16, int, Reason) {
	k := &pk.k
	backend := -1
	var dst, src *NATRange
	if p.LB != nil && len(p.LB.Backends) > 0 {
		backend = int(lbHash(k, p.LB.Hash) % uint64(len(p.LB.Backends)))
		b := p.LB.Backends[backend]
		dst = &NATRange{MinAddr: b.Addr, MaxAddr: b.Addr, MinPort: b.Port, MaxPort: b.Port}
	} else if p.NAT != nil {
		dst = p.NAT.Dst
	}
	if p.NAT != nil {
		src = p.NAT.Src
	}
	var flags uint16
	// Where the address and port search starts: a hash of the addresses
	// and the destination port (the fields NAT does not choose).
	h := lbHash(k, HashSrcAddr|HashDstAddr|HashDstPort|HashProto)
	if dst != nil {
		span, ok := spanOf(dst, k.v6)
		if !ok {
			return reply, 0, -1, ReasonNATMismatch
		}
		reply.src = span.at(h)
		if dst.MinPort != 0 && hasPorts(k.proto) {
			lo, n, _ := portSpan(dst, 0, false)
			reply.sport = lo + uint16(uint32(h>>32)%n)
		}
		flags |= flagDNAT
		if src == nil {
			// DNAT alone: a collision moves to the next address or port
			// of the range.
			if !t.natSearch(z, &reply, &reply.src, portPtr(&reply, dst, true), span, dst, reply.sport, h) {
				return reply, 0, -1, ReasonNATExhausted
			}
		}
	}
	if src != nil {
		span, ok := spanOf(src, k.v6)
		if !ok {
			return reply, 0, -1, ReasonNATMismatch
		}
		reply.dst = span.at(h)
		flags |= flagSNAT
		if !t.natSearch(z, &reply, &reply.dst, portPtr(&reply, src, false), span, src, k.sport, h) {
			return reply, 0, -1, ReasonNATExhausted
		}
	}
	if flags == 0 && z.contains(&reply, t.hash(&reply)) {
		return reply, 0, -1, ReasonCollision
	}
	return reply, flags, backend, ReasonNone
}

// portPtr returns the field of the reply key that a translation's port
// selects, or nil when the protocol has none: for DNAT the reply's source
// port; for SNAT its destination port, or the ICMP identifier.
func portPtr(reply *key, r *NATRange, dnat bool) *uint16 {
	switch {
	case hasPorts(reply.proto) && dnat:
		if r.MinPort == 0 {
			return nil
		}
		return &reply.sport
	case hasPorts(reply.proto):
		return &reply.dport
	case !dnat && (reply.proto == protoICMP || reply.proto == protoICMPv6):
		return &reply.sport
	}
	return nil
}

// natSearch walks addresses and ports from a hashed start until the reply
// key is free in the zone.
func (t *Tracker) natSearch(z *zone, reply *key, addr *[16]byte, port *uint16, span addrSpan, r *NATRange, own uint16, h uint64) bool {
	free := func() bool { return !z.contains(reply, t.hash(reply)) }
	tries := 0
	if port == nil {
		for i := range min(span.n, maxNATTries) {
			*addr = span.at(h + i)
			if free() {
				return true
			}
		}
		return false
	}
	// The packet's own port first, when no range is given.
	if r.MinPort == 0 {
		for i := range min(span.n, maxNATTries/2) {
			*addr = span.at(h + i)
			*port = own
			tries++
			if free() {
				return true
			}
		}
	}
	lo, n, _ := portSpan(r, own, true)
	start := uint32(h>>32) % n
	for i := range span.n {
		*addr = span.at(h + i)
		for j := range n {
			if tries >= maxNATTries {
				return false
			}
			tries++
			*port = lo + uint16((start+j)%n)
			if free() {
				return true
			}
		}
	}
	return false
}

// natState maps a connection's translation to the ct_state bits of a packet
// in direction dir: the reply direction undoes SNAT with a destination
// rewrite and vice versa.
func natState(c *conn, dir int) State {
	var s State
	snat, dnat := c.flags&flagSNAT != 0, c.flags&flagDNAT != 0
	if dir == 1 {
		snat, dnat = dnat, snat
	}
	if snat {
		s |= StateSNAT
	}
	if dnat {
		s |= StateDNAT
	}
	return s
}

// natPacket rewrites a packet of direction dir to the tuple the other side
// expects.
func natPacket(pkt []byte, pk *packet, c *conn, dir int, partial bool) State {
	want := c.keys[1-dir].reverse()
	rewrite(pkt, pk, &want, partial)
	return natState(c, dir)
}

// natICMPError translates an ICMP error travelling in direction dir: the
// packet it quotes went the other way and is restored to that direction's
// untranslated tuple; the outer addresses that belong to the connection are
// translated as a packet of direction dir would be.
func natICMPError(pkt []byte, pk *packet, c *conn, dir int) State {
	in := pk.inner
	target := c.keys[1-dir]
	rewrite(pkt, in, &target, false)
	want := pk.k
	if pk.k.dst == c.keys[dir].dst {
		want.dst = c.keys[1-dir].src
	}
	if pk.k.src == c.keys[dir].src {
		want.src = c.keys[1-dir].dst
	}
	outer := *pk
	outer.k.proto = 0 // addresses only; the ICMP checksum is redone below
	rewrite(pkt, &outer, &want, false)
	icmp := pkt[pk.l4off:pk.l4end]
	icmp[2], icmp[3] = 0, 0
	var sum uint32
	if pk.v6 {
		sum = pseudoSum(pkt[pk.ipSrc:pk.ipSrc+16], pkt[pk.ipDst:pk.ipDst+16], uint32(len(icmp)), protoICMPv6)
	}
	binary.BigEndian.PutUint16(icmp[2:], ^fold(sum+sumBytes(icmp)))
	return natState(c, dir)
}

// rewrite sets the packet's addresses and ports (ICMP identifier) to want,
// keeping the IP and transport checksums right.
func rewrite(pkt []byte, pk *packet, want *key, partial bool) {
	l4csum := -1
	pseudo := false
	switch pk.k.proto {
	case protoTCP:
		if pk.l4off+18 <= pk.l4end {
			l4csum, pseudo = pk.l4off+16, true
		}
	case protoUDP:
		if pk.l4off+8 <= pk.l4end {
			l4csum, pseudo = pk.l4off+6, true
			if !pk.v6 && binary.BigEndian.Uint16(pkt[l4csum:]) == 0 {
				l4csum = -1 // no checksum
			}
		}
	case protoICMPv6:
		l4csum, pseudo = pk.l4off+2, true
	case protoICMP:
		l4csum = pk.l4off + 2
	}
	alen := 4
	aoff := 12
	if pk.v6 {
		alen, aoff = 16, 0
	}
	setAddr := func(off int, a [16]byte) {
		old := pkt[off : off+alen]
		nw := a[aoff:]
		if string(old) == string(nw) {
			return
		}
		if !pk.v6 {
			adjust(pkt, pk.l3off+10, old, nw, false)
		}
		if l4csum >= 0 && pseudo {
			adjust(pkt, l4csum, old, nw, partial)
		}
		copy(old, nw)
	}
	setAddr(pk.ipSrc, want.src)
	setAddr(pk.ipDst, want.dst)
	setPort := func(off int, v uint16) {
		if off+2 > pk.l4end || binary.BigEndian.Uint16(pkt[off:]) == v {
			return
		}
		var nw [2]byte
		binary.BigEndian.PutUint16(nw[:], v)
		if l4csum >= 0 && !partial {
			adjust(pkt, l4csum, pkt[off:off+2], nw[:], false)
		}
		copy(pkt[off:], nw[:])
	}
	switch pk.k.proto {
	case protoTCP, protoUDP, protoSCTP:
		setPort(pk.l4off, want.sport)
		setPort(pk.l4off+2, want.dport)
	case protoICMP, protoICMPv6:
		setPort(pk.l4off+4, want.sport)
	}
	if pk.k.proto == protoSCTP && pk.l4off+12 <= pk.l4end && pk.inner == nil {
		sctp := pkt[pk.l4off:pk.l4end]
		clear(sctp[8:12])
		binary.LittleEndian.PutUint32(sctp[8:], crc32.Checksum(sctp, crc32.MakeTable(crc32.Castagnoli)))
	}
	pk.k.src, pk.k.dst = want.src, want.dst
}

// adjust updates the checksum at pkt[off:] for old bytes replaced by new
// (RFC 1624). partial: the field holds an uncomplemented pseudo-header sum.
func adjust(pkt []byte, off int, old, nw []byte, partial bool) {
	if off+2 > len(pkt) {
		return
	}
	sum := binary.BigEndian.Uint16(pkt[off:])
	if partial {
		sum = ^sum
	}
	s := uint32(^sum)
	for i := 0; i+1 < len(old); i += 2 {
		s += uint32(^binary.BigEndian.Uint16(old[i:]))
		s += uint32(binary.BigEndian.Uint16(nw[i:]))
	}
	out := ^fold(s)
	if partial {
		out = ^out
	}
	if out == 0 && !partial {
		// A transmitted all-zero checksum means "none" for UDP; one's
		// complement arithmetic allows writing 0xffff instead.
		out = 0xffff
	}
	binary.BigEndian.PutUint16(pkt[off:], out)
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func sumBytes(b []byte) uint32 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func pseudoSum(src, dst []byte, length uint32, proto uint8) uint32 {
	s := sumBytes(src) + sumBytes(dst)
	s += length>>16 + length&0xffff + uint32(proto)
	return s
}
