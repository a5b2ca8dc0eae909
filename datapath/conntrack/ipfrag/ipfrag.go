// Package ipfrag reassembles IPv4 and IPv6 fragments before connection
// tracking, as OVS does for the ct action: fragments are collected per zone
// (fragments in different zones never combine), the pipeline stops for all
// but the fragment that completes a datagram, and that one continues as the
// whole datagram. The caller refragments on output if it must, to at most
// Result.MaxFragSize, the largest fragment received.
//
// A Reassembler is a state machine without I/O or clock: the caller passes
// now to Add and calls Expire to drop incomplete datagrams after Timeout.
// It bounds its memory (MaxDatagrams, MaxDatagramSize) and rejects
// overlapping fragments (RFC 5722), which is what attackers send.
package ipfrag

import (
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"time"
)

// Status says what Add did with a packet.
type Status uint8

const (
	// NotFragment: the packet is whole; process it as is.
	NotFragment Status = iota
	// Held: the fragment was kept; processing of this packet stops.
	Held
	// Complete: the fragment completed a datagram; process Result.Packet.
	Complete
	// Dropped: the fragment is invalid or over a limit; Result.Err says why.
	Dropped
)

// Config bounds a Reassembler; zero fields take the defaults.
type Config struct {
	Timeout         time.Duration // default 15 s
	MaxDatagrams    int           // incomplete datagrams held at once; default 1000
	MaxDatagramSize int           // reassembled IP payload bytes; default 65535
}

// Result is Add's outcome.
type Result struct {
	Status Status
	// Packet is the reassembled packet (the first fragment's bytes before
	// l3off, then the whole IP datagram) when Status is Complete.
	Packet      []byte
	MaxFragSize int // largest fragment received, L3 header included
	Err         error
}

// Errors for dropped fragments.
var (
	ErrMalformed = errors.New("ipfrag: malformed fragment")
	ErrOverlap   = errors.New("ipfrag: overlapping fragment")
	ErrTooBig    = errors.New("ipfrag: datagram exceeds the maximum size")
	ErrFull      = errors.New("ipfrag: too many incomplete datagrams")
)

type datagramKey struct {
	zone     uint16
	v6       bool
	src, dst [16]byte
	id       uint32
	proto    uint8 // IPv4 only; IPv6's next header may differ per fragment chain
}

type piece struct {
	off  int
	data []byte
}

type datagram struct {
	header   []byte // L2 prefix + unfragmentable L3 part of the first fragment
	l3off    int
	nextHdr  int // IPv6: offset in header of the next-header byte to patch
	proto    uint8
	pieces   []piece
	total    int // payload length once the last fragment arrived; -1 before
	have     int
	maxFrag  int
	deadline int64
}

// Reassembler holds incomplete datagrams. It is safe for concurrent use.
type Reassembler struct {
	cfg   Config
	mu    sync.Mutex
	held  map[datagramKey]*datagram
	order []datagramKey // arrival order, for expiry without a sweep of held
}

// New returns an empty Reassembler.
func New(cfg Config) *Reassembler {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.MaxDatagrams <= 0 {
		cfg.MaxDatagrams = 1000
	}
	if cfg.MaxDatagramSize <= 0 {
		cfg.MaxDatagramSize = 65535
	}
	return &Reassembler{cfg: cfg, held: make(map[datagramKey]*datagram)}
}

// Pending returns the number of incomplete datagrams held.
func (r *Reassembler) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// fragment is one parsed fragment.
type fragment struct {
	key      datagramKey
	off      int    // payload offset in bytes
	more     bool   // more fragments follow
	payload  []byte // fragmentable part
	header   []byte // pkt[:start of payload] without the IPv6 fragment header
	nextHdr  int    // IPv6: offset in header of the byte naming the next header
	proto    uint8  // IPv6: the fragment header's next header
	l3len    int
	isFragV6 bool
}

// Add offers one packet; pkt[l3off:] is an IPv4 or IPv6 packet. Add copies
// what it keeps, so the caller may reuse pkt.
func (r *Reassembler) Add(pkt []byte, l3off int, zone uint16, now time.Duration) Result {
	f, isFrag, err := parseFragment(pkt, l3off, zone)
	if err != nil {
		return Result{Status: Dropped, Err: err}
	}
	if !isFrag {
		return Result{Status: NotFragment}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.held[f.key]
	if d == nil {
		if len(r.held) >= r.cfg.MaxDatagrams {
			r.expireLocked(int64(now))
			if len(r.held) >= r.cfg.MaxDatagrams {
				return Result{Status: Dropped, Err: ErrFull}
			}
		}
		d = &datagram{total: -1, deadline: int64(now + r.cfg.Timeout), l3off: l3off}
		r.held[f.key] = d
		if len(r.order) > 2*r.cfg.MaxDatagrams+16 {
			r.compactLocked()
		}
		r.order = append(r.order, f.key)
	}
	end := f.off + len(f.payload)
	drop := func(err error) Result {
		delete(r.held, f.key)
		return Result{Status: Dropped, Err: err}
	}
	if end > r.cfg.MaxDatagramSize {
		return drop(ErrTooBig)
	}
	// An empty fragment adds nothing, and the overlap check cannot see it,
	// so repeats of one would grow the piece list without bound.
	if len(f.payload) == 0 || f.more && len(f.payload)%8 != 0 {
		return drop(ErrMalformed)
	}
	if !f.more {
		if d.total >= 0 && d.total != end || d.have > end {
			return drop(ErrOverlap)
		}
		d.total = end
	} else if d.total >= 0 && end > d.total {
		return drop(ErrOverlap)
	}
	for _, p := range d.pieces {
		if f.off < p.off+len(p.data) && p.off < end {
			return drop(ErrOverlap)
		}
	}
	d.pieces = append(d.pieces, piece{off: f.off, data: append([]byte(nil), f.payload...)})
	d.have += len(f.payload)
	d.maxFrag = max(d.maxFrag, f.l3len)
	if f.off == 0 {
		d.header = append([]byte(nil), f.header...)
		d.l3off = l3off
		d.nextHdr = f.nextHdr
		d.proto = f.proto
	}
	if d.total < 0 || d.have != d.total || d.header == nil {
		return Result{Status: Held, MaxFragSize: d.maxFrag}
	}
	delete(r.held, f.key)
	// The IP length field is 16 bits: IPv4's counts the header, IPv6's
	// the extension headers kept in front of the payload.
	lenField := len(d.header) - d.l3off + d.total
	if f.key.v6 {
		lenField -= 40
	}
	if lenField > 0xffff {
		return Result{Status: Dropped, Err: ErrTooBig}
	}
	return Result{Status: Complete, Packet: d.assemble(f.key.v6), MaxFragSize: d.maxFrag}
}

func (d *datagram) assemble(v6 bool) []byte {
	sort.Slice(d.pieces, func(i, j int) bool { return d.pieces[i].off < d.pieces[j].off })
	out := make([]byte, 0, len(d.header)+d.total)
	out = append(out, d.header...)
	for _, p := range d.pieces {
		out = append(out, p.data...)
	}
	ip := out[d.l3off:]
	if !v6 {
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[6:], 0)
		ihl := int(ip[0]&15) * 4
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], checksum(ip[:ihl]))
		return out
	}
	binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-40))
	out[d.nextHdr] = d.proto
	return out
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// Expire drops incomplete datagrams older than the timeout and returns how
// many it dropped. It looks only at the oldest datagrams.
func (r *Reassembler) Expire(now time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expireLocked(int64(now))
}

func (r *Reassembler) expireLocked(now int64) int {
	n := 0
	i := 0
	for ; i < len(r.order); i++ {
		k := r.order[i]
		d := r.held[k]
		if d == nil {
			continue // completed or dropped earlier
		}
		if d.deadline > now {
			break
		}
		delete(r.held, k)
		n++
	}
	r.order = append(r.order[:0], r.order[i:]...)
	return n
}

// compactLocked drops keys of finished datagrams from the arrival order.
func (r *Reassembler) compactLocked() {
	kept := r.order[:0]
	for _, k := range r.order {
		if r.held[k] != nil {
			kept = append(kept, k)
		}
	}
	r.order = kept
}

// Fragment splits the IP packet pkt[l3off:] into fragments whose IP part is
// at most mtu bytes, each with pkt[:l3off] in front; a packet that fits is
// returned as is. IPv4 packets with DF set are not split (ErrTooBig).
func Fragment(pkt []byte, l3off, mtu int, id uint32) ([][]byte, error) {
	if l3off < 0 || l3off >= len(pkt) {
		return nil, ErrMalformed
	}
	b := pkt[l3off:]
	var hlen, total int
	nextAt := 6 // IPv6: where the byte naming the fragment header goes
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return nil, ErrMalformed
		}
		hlen, total = int(b[0]&15)*4, int(binary.BigEndian.Uint16(b[2:]))
		if hlen < 20 || total < hlen || total > len(b) {
			return nil, ErrMalformed
		}
		if total <= mtu {
			return [][]byte{pkt}, nil
		}
		if binary.BigEndian.Uint16(b[6:])&0x4000 != 0 {
			return nil, ErrTooBig
		}
	case 6:
		if len(b) < 40 {
			return nil, ErrMalformed
		}
		total = 40 + int(binary.BigEndian.Uint16(b[4:]))
		if total > len(b) {
			return nil, ErrMalformed
		}
		if total <= mtu {
			return [][]byte{pkt}, nil
		}
		var err error
		if hlen, nextAt, err = unfragmentable(b[:total]); err != nil {
			return nil, err
		}
	default:
		return nil, ErrMalformed
	}
	v6 := b[0]>>4 == 6
	extra := 0
	if v6 {
		extra = 8
	}
	chunk := (mtu - hlen - extra) &^ 7
	if chunk <= 0 {
		return nil, ErrTooBig
	}
	payload := b[hlen:total]
	var out [][]byte
	for off := 0; off < len(payload); off += chunk {
		end := min(off+chunk, len(payload))
		more := end < len(payload)
		f := make([]byte, 0, l3off+hlen+extra+end-off)
		f = append(f, pkt[:l3off+hlen]...)
		ip := f[l3off:]
		if v6 {
			var fh [8]byte
			fh[0] = ip[nextAt]
			fo := uint16(off/8) << 3
			if more {
				fo |= 1
			}
			binary.BigEndian.PutUint16(fh[2:], fo)
			binary.BigEndian.PutUint32(fh[4:], id)
			ip[nextAt] = 44
			f = append(f, fh[:]...)
			f = append(f, payload[off:end]...)
			binary.BigEndian.PutUint16(f[l3off+4:], uint16(len(f)-l3off-40))
		} else {
			f = append(f, payload[off:end]...)
			ip = f[l3off:]
			fo := uint16(off/8) | binary.BigEndian.Uint16(b[6:])&0x2000
			if more {
				fo |= 0x2000
			}
			binary.BigEndian.PutUint16(ip[6:], fo)
			binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
			if off > 0 {
				blankUncopiedOptions(ip[20:hlen])
			}
			ip[10], ip[11] = 0, 0
			binary.BigEndian.PutUint16(ip[10:], checksum(ip[:hlen]))
		}
		out = append(out, f)
	}
	return out, nil
}

// blankUncopiedOptions overwrites with no-ops the IPv4 options that only
// the first fragment carries (RFC 791: those without the copied flag, such
// as record route), keeping the header length.
func blankUncopiedOptions(opts []byte) {
	for len(opts) > 0 {
		switch opts[0] {
		case 0: // end of options
			return
		case 1: // no-op
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
			return
		}
		n := int(opts[1])
		if opts[0]&0x80 == 0 {
			for i := range n {
				opts[i] = 1
			}
		}
		opts = opts[n:]
	}
}

// unfragmentable returns the length of the part of the IPv6 packet ip that
// every fragment repeats (RFC 8200 4.5: the base header, hop-by-hop and
// routing headers, and destination options in front of a routing header),
// and the offset of the next-header byte that will name the fragment header.
func unfragmentable(ip []byte) (hlen, nextAt int, err error) {
	hlen, nextAt = 40, 6
	for {
		next := ip[nextAt]
		perFragment := next == 0 || next == 43 || next == 60 && hlen+8 <= len(ip) && ip[hlen] == 43
		if !perFragment {
			return hlen, nextAt, nil
		}
		if hlen+8 > len(ip) {
			return 0, 0, ErrMalformed
		}
		n := (int(ip[hlen+1]) + 1) * 8
		if hlen+n > len(ip) {
			return 0, 0, ErrMalformed
		}
		nextAt, hlen = hlen, hlen+n
	}
}

// parseFragment reports whether pkt is a fragment and, if so, its parts.
func parseFragment(pkt []byte, l3off int, zone uint16) (fragment, bool, error) {
	var f fragment
	if l3off < 0 || l3off >= len(pkt) {
		return f, false, ErrMalformed
	}
	b := pkt[l3off:]
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return f, false, ErrMalformed
		}
		ihl := int(b[0]&15) * 4
		total := int(binary.BigEndian.Uint16(b[2:]))
		if ihl < 20 || total < ihl || total > len(b) {
			return f, false, ErrMalformed
		}
		fo := binary.BigEndian.Uint16(b[6:])
		if fo&0x3fff == 0 {
			return f, false, nil
		}
		f.key = datagramKey{zone: zone, id: uint32(binary.BigEndian.Uint16(b[4:])), proto: b[9]}
		copy(f.key.src[:], b[12:16])
		copy(f.key.dst[:], b[16:20])
		f.off = int(fo&0x1fff) * 8
		f.more = fo&0x2000 != 0
		f.payload = b[ihl:total]
		f.header = pkt[:l3off+ihl]
		f.l3len = total
		return f, true, nil
	case 6:
		if len(b) < 40 {
			return f, false, ErrMalformed
		}
		total := 40 + int(binary.BigEndian.Uint16(b[4:]))
		if total > len(b) {
			return f, false, ErrMalformed
		}
		next, nextAt, off := b[6], 6, 40
		for {
			switch next {
			case 0, 43, 60:
				if off+8 > total {
					return f, false, ErrMalformed
				}
				next, nextAt = b[off], off
				off += (int(b[off+1]) + 1) * 8
				continue
			case 44:
				if off+8 > total {
					return f, false, ErrMalformed
				}
				fo := binary.BigEndian.Uint16(b[off+2:])
				f.key = datagramKey{zone: zone, v6: true, id: binary.BigEndian.Uint32(b[off+4:])}
				copy(f.key.src[:], b[8:24])
				copy(f.key.dst[:], b[24:40])
				f.off = int(fo>>3) * 8
				f.more = fo&1 != 0
				if f.off == 0 && !f.more {
					// An atomic fragment (RFC 6946): whole already, but
					// it carries a fragment header; treat it as whole.
					return f, false, nil
				}
				f.proto = b[off]
				f.payload = b[off+8 : total]
				f.header = pkt[:l3off+off]
				f.nextHdr = l3off + nextAt
				f.l3len = total
				return f, true, nil
			}
			if off > total {
				return f, false, ErrMalformed
			}
			return f, false, nil
		}
	}
	return f, false, ErrMalformed
}
