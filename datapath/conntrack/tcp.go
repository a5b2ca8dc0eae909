package conntrack

// Per-direction TCP states: what one side has done.
const (
	tcpsClosed      uint8 = iota // sent nothing yet
	tcpsSynSent                  // sent its SYN
	tcpsEstablished              // its SYN was acknowledged
	tcpsClosing                  // sent its FIN
	tcpsFinAcked                 // its FIN was acknowledged
	tcpsReset                    // the connection was reset
)

// Connection-level TCP states, derived from both directions.
const (
	tcpSynSent uint8 = iota
	tcpSynRecv
	tcpEstablished
	tcpFinWait
	tcpTimeWait
	tcpClose
)

var tcpStateNames = [...]string{"SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "TIME_WAIT", "CLOSED"}

// maxAckWindow bounds how far an acknowledgement may lag behind or run ahead
// of what the other side sent (one maximal window plus one segment).
const maxAckWindow = 65535 + 1500

func seqLT(a, b uint32) bool  { return int32(a-b) < 0 }
func seqGEQ(a, b uint32) bool { return int32(a-b) >= 0 }
func seqGT(a, b uint32) bool  { return int32(a-b) > 0 }

func tcpConnState(c *conn) uint8 {
	o, r := c.peer[0].state, c.peer[1].state
	switch {
	case o == tcpsReset || r == tcpsReset:
		return tcpClose
	case o >= tcpsFinAcked && r >= tcpsFinAcked:
		return tcpTimeWait
	case o >= tcpsClosing || r >= tcpsClosing:
		return tcpFinWait
	case o >= tcpsEstablished && r >= tcpsEstablished:
		return tcpEstablished
	case r >= tcpsSynSent:
		return tcpSynRecv
	}
	return tcpSynSent
}

// tcpBadFlags rejects flag combinations no TCP sends.
func tcpBadFlags(f uint8) bool {
	switch {
	case f&(tcpSYN|tcpRST) == tcpSYN|tcpRST, f&(tcpSYN|tcpFIN) == tcpSYN|tcpFIN:
		return true
	case f&tcpFIN != 0 && f&tcpACK == 0:
		return true
	case f&(tcpSYN|tcpRST|tcpACK) == 0:
		return true
	}
	return false
}

// tcpValidNew reports whether a segment may start a connection: a SYN, or
// (picked up mid-stream, as OVS allows) a plain segment; never a SYN-ACK or
// RST.
func tcpValidNew(f uint8) bool {
	if tcpBadFlags(f) || f&tcpRST != 0 {
		return false
	}
	return f&(tcpSYN|tcpACK) != tcpSYN|tcpACK
}

// tcpWouldReopen reports whether a segment ends the connection it matched
// and starts a new one: a SYN on a closed or TIME_WAIT connection, or a SYN
// with a new initial sequence while the first is still unanswered.
func tcpWouldReopen(c *conn, dir int, pk *packet) bool {
	if pk.flags&(tcpSYN|tcpACK|tcpRST) != tcpSYN || tcpBadFlags(pk.flags) {
		return false
	}
	switch tcpConnState(c) {
	case tcpTimeWait, tcpClose:
		return true
	case tcpSynSent:
		return dir == 0 && !c.peer[1].inited && pk.tcpSeq+1 != c.peer[0].end
	}
	return false
}

// tcpInit sets up the originator's side from the segment that creates the
// connection.
func tcpInit(c *conn, pk *packet, dataLen uint32) {
	s := &c.peer[0]
	end := pk.tcpSeq + dataLen
	if pk.flags&tcpSYN != 0 {
		end++
		s.state = tcpsSynSent
		s.scale = pk.wscale
	} else {
		// Picked up mid-stream: windows are learned, not checked.
		c.flags |= flagPickup
		s.state, c.peer[1].state = tcpsEstablished, tcpsEstablished
		s.scale, c.peer[1].scale = 0, 0
	}
	if pk.flags&tcpFIN != 0 {
		end++
	}
	s.end = end
	s.maxEnd = end
	s.maxWin = max(uint32(pk.tcpWin), 1)
	s.inited = true
}

type tcpVerdict uint8

const (
	tcpValid   tcpVerdict = iota
	tcpIgnored            // passes without changing state (challenge ACK and its RST)
	tcpInvalid
)

// tcpUpdate checks a segment of direction dir against the connection and
// advances its state. The caller holds c.mu and has ruled out
// tcpWouldReopen.
func tcpUpdate(c *conn, dir int, pk *packet, dataLen uint32, liberal bool) (tcpVerdict, Reason) {
	f := pk.flags
	if tcpBadFlags(f) {
		return tcpInvalid, ReasonTCPFlags
	}
	s, r := &c.peer[dir], &c.peer[1-dir]
	syn, ack, rst, fin := f&tcpSYN != 0, f&tcpACK != 0, f&tcpRST != 0, f&tcpFIN != 0

	if !s.inited && c.flags&flagPickup == 0 {
		// The responder's first segment.
		switch {
		case syn && ack:
			if pk.tcpAck != r.end {
				return tcpInvalid, ReasonTCPWindow
			}
			// Window scaling holds only if both SYNs offered it.
			if pk.wscale < 0 || r.scale < 0 {
				s.scale, r.scale = 0, 0
			} else {
				s.scale = pk.wscale
			}
		case rst:
			// Connection refused: the RST must acknowledge the SYN.
			if !ack || pk.tcpAck != r.end {
				return tcpInvalid, ReasonTCPWindow
			}
			s.state, r.state = tcpsReset, tcpsReset
			return tcpValid, ReasonNone
		case ack && !syn:
			// An ACK that does not answer our SYN: the responder still
			// holds an older connection with these ports (TIME_WAIT) and
			// sends a challenge ACK. Let it pass and remember it, so the
			// originator's RST answering it passes too.
			c.flags |= flagChallenge
			c.lastAck = pk.tcpAck
			return tcpIgnored, ReasonNone
		default:
			return tcpInvalid, ReasonTCPState
		}
	}
	if !r.inited && c.flags&flagPickup == 0 {
		// The originator before any answer: SYN retransmissions, an RST
		// answering a challenge ACK, or an abort.
		switch {
		case syn && !ack && pk.tcpSeq+1 == s.end:
			return tcpValid, ReasonNone
		case rst && c.flags&flagChallenge != 0 && pk.tcpSeq == c.lastAck:
			c.flags &^= flagChallenge
			return tcpIgnored, ReasonNone
		case rst && pk.tcpSeq == s.end:
			s.state, r.state = tcpsReset, tcpsReset
			return tcpValid, ReasonNone
		}
		return tcpInvalid, ReasonTCPState
	}

	end := pk.tcpSeq + dataLen
	if syn {
		end++
	}
	if fin {
		end++
	}
	win := uint32(pk.tcpWin)
	if !syn && s.scale > 0 {
		win <<= uint(s.scale)
	}
	ackv := pk.tcpAck
	if !ack {
		ackv = r.end
	}
	if !s.inited {
		// First segment seen from this side (responder's SYN-ACK, or a
		// picked-up connection's first reply).
		s.end = end
		s.maxWin = max(win, 1)
		s.maxEnd = end + max(r.maxWin, 1)
		s.inited = true
		if c.flags&flagPickup != 0 {
			// Learn the originator's bound from this acknowledgement.
			r.maxEnd = ackv + max(win, 1)
			r.end = ackv
		}
	}
	if !liberal && c.flags&flagPickup == 0 {
		sws := uint(max(s.scale, 0))
		ackskew := int32(r.end - ackv)
		inWindow := seqGEQ(s.maxEnd, end) &&
			seqGEQ(pk.tcpSeq, s.end-r.maxWin) &&
			ackskew >= -maxAckWindow && int64(ackskew) <= int64(maxAckWindow)<<sws
		if !inWindow {
			return tcpInvalid, ReasonTCPWindow
		}
	}
	s.maxWin = max(s.maxWin, win)
	if seqGT(end, s.end) {
		s.end = end
	}
	if ack && seqGEQ(ackv+win, r.maxEnd) {
		r.maxEnd = ackv + max(win, 1)
	}
	if syn && s.state < tcpsSynSent {
		s.state = tcpsSynSent
	}
	if fin && s.state < tcpsClosing {
		s.state = tcpsClosing
	}
	if ack {
		switch {
		case r.state == tcpsSynSent:
			r.state = tcpsEstablished
		case r.state == tcpsClosing && seqGEQ(ackv, r.end):
			r.state = tcpsFinAcked
		}
	}
	if rst {
		s.state, r.state = tcpsReset, tcpsReset
	}
	return tcpValid, ReasonNone
}
