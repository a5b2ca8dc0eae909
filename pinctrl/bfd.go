package pinctrl

// BFD, Bidirectional Forwarding Detection (RFC 5880, over UDP per RFC
// 5881): the control packet's wire format. The session's state machine
// is in bfd_session.go, the sessions govn chassis runs over its Geneve
// tunnels (gateway liveness) in bfd_tunnel.go.
//
// A BFD control packet is 24 bytes, then an optional authentication
// section (govn runs no authentication: a packet that asks for it is
// dropped, as RFC 5880 6.8.6 says for a session without it):
//
//	0       vers(3) diag(5)
//	1       sta(2) P F C A D M
//	2       detect mult
//	3       length
//	4-7     my discriminator
//	8-11    your discriminator
//	12-15   desired min TX interval (µs)
//	16-19   required min RX interval (µs)
//	20-23   required min echo RX interval (µs)

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// BFD's UDP ports (RFC 5881 section 4): control packets go to 3784 from
// a source port in 49152-65535.
const (
	BFDPort       = 3784
	BFDSrcPortMin = 49152
	BFDSrcPortMax = 65535
	bfdVersion    = 1
	bfdControlLen = 24
)

// BFDState is a session state (RFC 5880 section 4.1, "Sta").
type BFDState uint8

// The session states, as the wire numbers them.
const (
	BFDAdminDown BFDState = 0
	BFDDown      BFDState = 1
	BFDInit      BFDState = 2
	BFDUp        BFDState = 3
)

// String is the state as the Southbound's BFD.status writes it.
func (s BFDState) String() string {
	switch s {
	case BFDAdminDown:
		return "admin_down"
	case BFDDown:
		return "down"
	case BFDInit:
		return "init"
	case BFDUp:
		return "up"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// BFDDiag is a diagnostic code (RFC 5880 section 4.1, "Diag"): why the
// session last left Up.
type BFDDiag uint8

// The diagnostic codes a session sets.
const (
	BFDDiagNone          BFDDiag = 0
	BFDDiagDetectExpired BFDDiag = 1 // Control Detection Time Expired
	BFDDiagNeighborDown  BFDDiag = 3 // Neighbor Signaled Session Down
	BFDDiagAdminDown     BFDDiag = 7 // Administratively Down
)

// BFDControl is a BFD control packet, its intervals as durations (the
// wire carries microseconds).
type BFDControl struct {
	Version      uint8
	Diag         BFDDiag
	State        BFDState
	Poll, Final  bool
	CPI          bool // control plane independent
	Auth         bool
	Demand       bool
	Multipoint   bool
	DetectMult   uint8
	MyDisc       uint32
	YourDisc     uint32
	DesiredMinTx time.Duration
	RequiredMinRx,
	RequiredMinEchoRx time.Duration
}

// Errors of ParseBFDControl: the packet is discarded (RFC 5880 6.8.6).
var (
	ErrBFDShort      = errors.New("bfd: shorter than a control packet")
	ErrBFDVersion    = errors.New("bfd: not version 1")
	ErrBFDLength     = errors.New("bfd: length field out of range")
	ErrBFDDetectMult = errors.New("bfd: detect multiplier zero")
	ErrBFDMultipoint = errors.New("bfd: multipoint bit set")
	ErrBFDMyDisc     = errors.New("bfd: my discriminator zero")
	ErrBFDAuth       = errors.New("bfd: authentication not in use")
	ErrBFDPollFinal  = errors.New("bfd: poll and final both set")
)

// ParseBFDControl reads a control packet from a UDP payload and checks
// what RFC 5880 6.8.6 checks before a packet reaches a session (the
// checks that need the session, such as your discriminator, are the
// session's).
func ParseBFDControl(b []byte) (BFDControl, error) {
	if len(b) < bfdControlLen {
		return BFDControl{}, ErrBFDShort
	}
	var p BFDControl
	p.Version = b[0] >> 5
	p.Diag = BFDDiag(b[0] & 0x1f)
	p.State = BFDState(b[1] >> 6)
	p.Poll = b[1]&0x20 != 0
	p.Final = b[1]&0x10 != 0
	p.CPI = b[1]&0x08 != 0
	p.Auth = b[1]&0x04 != 0
	p.Demand = b[1]&0x02 != 0
	p.Multipoint = b[1]&0x01 != 0
	p.DetectMult = b[2]
	length := int(b[3])
	p.MyDisc = binary.BigEndian.Uint32(b[4:])
	p.YourDisc = binary.BigEndian.Uint32(b[8:])
	p.DesiredMinTx = time.Duration(binary.BigEndian.Uint32(b[12:])) * time.Microsecond
	p.RequiredMinRx = time.Duration(binary.BigEndian.Uint32(b[16:])) * time.Microsecond
	p.RequiredMinEchoRx = time.Duration(binary.BigEndian.Uint32(b[20:])) * time.Microsecond
	switch {
	case p.Version != bfdVersion:
		return p, ErrBFDVersion
	case length < bfdControlLen || length > len(b):
		return p, ErrBFDLength
	case p.Auth:
		return p, ErrBFDAuth
	case p.DetectMult == 0:
		return p, ErrBFDDetectMult
	case p.Multipoint:
		return p, ErrBFDMultipoint
	case p.MyDisc == 0:
		return p, ErrBFDMyDisc
	case p.Poll && p.Final:
		return p, ErrBFDPollFinal
	}
	return p, nil
}

// usec is d in whole microseconds, saturated to 32 bits.
func usec(d time.Duration) uint32 {
	us := d / time.Microsecond
	switch {
	case us < 0:
		return 0
	case us > 0xffffffff:
		return 0xffffffff
	}
	return uint32(us)
}

// Append appends p's wire form (24 bytes, no authentication) to b. The
// version is always 1.
func (p *BFDControl) Append(b []byte) []byte {
	flags := byte(p.State&3) << 6
	for i, f := range []bool{p.Poll, p.Final, p.CPI, false, p.Demand, p.Multipoint} {
		if f {
			flags |= 0x20 >> i
		}
	}
	b = append(b, bfdVersion<<5|byte(p.Diag&0x1f), flags, p.DetectMult, bfdControlLen)
	b = binary.BigEndian.AppendUint32(b, p.MyDisc)
	b = binary.BigEndian.AppendUint32(b, p.YourDisc)
	b = binary.BigEndian.AppendUint32(b, usec(p.DesiredMinTx))
	b = binary.BigEndian.AppendUint32(b, usec(p.RequiredMinRx))
	return binary.BigEndian.AppendUint32(b, usec(p.RequiredMinEchoRx))
}
