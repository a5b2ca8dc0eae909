package conntrack

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// families runs a test for IPv4 and IPv6 addresses.
var families = []struct {
	name                   string
	client, server, router string
	backend, vip, other    string
}{
	{"ipv4", "10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.1.2", "10.0.9.9", "10.0.0.3"},
	{"ipv6", "fd00::1", "fd00:1::1", "fd00:2::1", "fd00:1::2", "fd00:9::9", "fd00::3"},
}

// conv plays one TCP conversation between a client and a server through a
// tracker, keeping each side's sequence numbers.
type conv struct {
	t              *testing.T
	tr             *Tracker
	zone           uint16
	client, server string
	cport, sport   uint16
	cseq, sseq     uint32
	now            time.Duration
	commit         bool
}

func newConv(t *testing.T, tr *Tracker, client, server string) *conv {
	return &conv{t: t, tr: tr, zone: 5, client: client, server: server, cport: 40000, sport: 80,
		cseq: 1000, sseq: 900000, commit: true}
}

// seg sends one segment; fromClient picks the direction. Sequence numbers
// advance as a real TCP would.
func (c *conv) seg(fromClient bool, flags uint8, payload int) Result {
	s := spec{proto: protoTCP, flags: flags, payload: payload, win: 1000}
	if fromClient {
		s.src, s.dst, s.sport, s.dport, s.seq, s.ack = c.client, c.server, c.cport, c.sport, c.cseq, c.sseq
	} else {
		s.src, s.dst, s.sport, s.dport, s.seq, s.ack = c.server, c.client, c.sport, c.cport, c.sseq, c.cseq
	}
	adv := uint32(payload)
	if flags&(tcpSYN|tcpFIN) != 0 {
		adv++
	}
	if fromClient {
		c.cseq += adv
	} else {
		c.sseq += adv
	}
	return c.raw(s)
}

func (c *conv) raw(s spec) Result {
	c.now += time.Millisecond
	return c.tr.Process(build(s), 0, Params{Zone: c.zone, Commit: c.commit}, c.now)
}

func (c *conv) expect(what string, res Result, want State) {
	c.t.Helper()
	if res.State != want {
		c.t.Errorf("%s: state %v, want %v (reason %q)", what, res.State, want, res.Reason)
	}
}

func (c *conv) protoState() string {
	var states []string
	c.tr.Dump(c.zone, func(e Entry) bool {
		states = append(states, e.ProtoState)
		return true
	})
	return strings.Join(states, ",")
}

const (
	trkNew = StateTracked | StateNew
	trkEst = StateTracked | StateEstablished
	trkRpl = StateTracked | StateEstablished | StateReply
	trkInv = StateTracked | StateInvalid
)

func (c *conv) handshake() {
	c.t.Helper()
	c.expect("SYN", c.seg(true, tcpSYN, 0), trkNew)
	c.expect("SYN-ACK", c.seg(false, tcpSYN|tcpACK, 0), trkRpl)
	c.expect("ACK", c.seg(true, tcpACK, 0), trkEst)
	if got := c.protoState(); got != "ESTABLISHED" {
		c.t.Errorf("after handshake: %s, want ESTABLISHED", got)
	}
}

func TestTCPLifecycle(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			c := newConv(t, tr, f.client, f.server)
			c.expect("SYN", c.seg(true, tcpSYN, 0), trkNew)
			c.cseq--
			c.expect("retransmitted SYN", c.seg(true, tcpSYN, 0), trkNew)
			if got := c.protoState(); got != "SYN_SENT" {
				t.Errorf("after SYN: %s, want SYN_SENT", got)
			}
			c.expect("SYN-ACK", c.seg(false, tcpSYN|tcpACK, 0), trkRpl)
			c.expect("ACK", c.seg(true, tcpACK, 0), trkEst)
			c.expect("request", c.seg(true, tcpACK|tcpPSH, 100), trkEst)
			c.expect("response", c.seg(false, tcpACK|tcpPSH, 500), trkRpl)
			c.expect("ack", c.seg(true, tcpACK, 0), trkEst)

			// A segment far beyond the receiver's window is invalid and
			// changes nothing.
			save := c.cseq
			c.cseq += 10_000_000
			c.expect("out-of-window data", c.seg(true, tcpACK, 10), trkInv)
			c.cseq = save
			// An acknowledgement of data never sent is invalid too.
			save = c.sseq
			c.sseq += 5_000_000
			c.expect("ack of unsent data", c.seg(true, tcpACK, 0), trkInv)
			c.sseq = save
			c.expect("still fine", c.seg(true, tcpACK, 10), trkEst)

			c.expect("client FIN", c.seg(true, tcpFIN|tcpACK, 0), trkEst)
			if got := c.protoState(); got != "FIN_WAIT" {
				t.Errorf("after FIN: %s, want FIN_WAIT", got)
			}
			c.expect("server ACK", c.seg(false, tcpACK, 0), trkRpl)
			c.expect("server FIN", c.seg(false, tcpFIN|tcpACK, 0), trkRpl)
			c.expect("client ACK", c.seg(true, tcpACK, 0), trkEst)
			if got := c.protoState(); got != "TIME_WAIT" {
				t.Errorf("after both FINs: %s, want TIME_WAIT", got)
			}
			// TIME_WAIT expires on its own timeout.
			n := tr.Expire(c.now + DefaultTimeouts().TCPTimeWait + time.Second)
			if n != 1 || c.protoState() != "" {
				t.Errorf("expire after TIME_WAIT: %d expired, left %q", n, c.protoState())
			}
		})
	}
}

func TestTCPReset(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			c := newConv(t, tr, f.client, f.server)
			c.handshake()
			// An RST far outside the window must not tear the
			// connection down (blind reset attack).
			save := c.sseq
			c.sseq += 1 << 30
			c.expect("blind RST", c.seg(false, tcpRST, 0), trkInv)
			c.sseq = save
			if got := c.protoState(); got != "ESTABLISHED" {
				t.Fatalf("after blind RST: %s", got)
			}
			c.expect("RST", c.seg(false, tcpRST|tcpACK, 0), trkRpl)
			if got := c.protoState(); got != "CLOSED" {
				t.Errorf("after RST: %s, want CLOSED", got)
			}
			// A new SYN on the closed connection starts a new one.
			c.cseq += 5000
			c.expect("new SYN", c.seg(true, tcpSYN, 0), trkNew)
			if got := c.protoState(); got != "SYN_SENT" {
				t.Errorf("after new SYN: %s, want SYN_SENT", got)
			}
		})
	}
}

func TestTCPInvalidStarts(t *testing.T) {
	tr := newTracker(t, Config{})
	for _, tc := range []struct {
		flags uint8
		want  State
	}{
		{tcpSYN | tcpACK, trkInv},
		{tcpRST, trkInv},
		{tcpSYN | tcpFIN, trkInv},
		{tcpSYN | tcpRST, trkInv},
		{tcpFIN, trkInv},
		{0, trkInv},
		{tcpACK, trkNew}, // picked up mid-stream, as OVS does
		{tcpSYN, trkNew},
	} {
		s := spec{src: "10.1.0.1", dst: "10.1.0.2", proto: protoTCP, sport: 1234, dport: 80, flags: tc.flags}
		res := tr.Process(build(s), 0, Params{Zone: uint16(tc.flags) + 100, Commit: true}, time.Second)
		if res.State != tc.want {
			t.Errorf("flags %#x: %v, want %v", tc.flags, res.State, tc.want)
		}
	}
	// A SYN-ACK that does not acknowledge the SYN is invalid.
	c := newConv(t, tr, "10.2.0.1", "10.2.0.2")
	c.expect("SYN", c.seg(true, tcpSYN, 0), trkNew)
	c.cseq += 77
	c.expect("bad SYN-ACK", c.seg(false, tcpSYN|tcpACK, 0), trkInv)
}

// TestTCPTimeWaitPortReuse: the client reuses its source port while the
// server still holds the previous connection in TIME_WAIT. The server
// answers the new SYN with a challenge ACK for the old connection; the
// client answers that with an RST, which ends the server's TIME_WAIT, and
// its retransmitted SYN then opens the connection. OVS 3.1's userspace
// conntrack marked the challenge ACK (and so the RST never came) invalid:
// the packets were dropped and the connection hung. Here all of them pass.
func TestTCPTimeWaitPortReuse(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tr := newTracker(t, Config{})
			c := newConv(t, tr, f.client, f.server)
			c.handshake()
			c.seg(true, tcpACK|tcpPSH, 10)
			c.seg(false, tcpFIN|tcpACK, 0)
			c.seg(true, tcpFIN|tcpACK, 0)
			c.seg(false, tcpACK, 0)
			if got := c.protoState(); got != "TIME_WAIT" {
				t.Fatalf("old connection: %s, want TIME_WAIT", got)
			}
			oldClientSeq, oldServerSeq := c.cseq, c.sseq

			// New SYN from the same port with an unrelated ISN.
			c.cseq = oldClientSeq + 3_000_000_000
			newISN := c.cseq
			c.expect("new SYN", c.seg(true, tcpSYN, 0), trkNew)
			// The server, in TIME_WAIT, sends a challenge ACK for the old
			// connection.
			challenge := spec{src: f.server, dst: f.client, proto: protoTCP, sport: c.sport, dport: c.cport,
				seq: oldServerSeq, ack: oldClientSeq, flags: tcpACK, win: 1000}
			c.expect("challenge ACK", c.raw(challenge), trkRpl)
			// The client answers with an RST carrying the acknowledged
			// sequence.
			rst := spec{src: f.client, dst: f.server, proto: protoTCP, sport: c.cport, dport: c.sport,
				seq: oldClientSeq, flags: tcpRST}
			c.expect("client RST", c.raw(rst), trkNew)
			if got := c.protoState(); got != "SYN_SENT" {
				t.Fatalf("after RST: %s, want SYN_SENT", got)
			}
			// The retransmitted SYN and the rest of the handshake.
			c.cseq = newISN
			c.expect("retransmitted SYN", c.seg(true, tcpSYN, 0), trkNew)
			c.sseq = 12345
			c.expect("SYN-ACK", c.seg(false, tcpSYN|tcpACK, 0), trkRpl)
			c.expect("ACK", c.seg(true, tcpACK, 0), trkEst)
			c.expect("data", c.seg(false, tcpACK, 100), trkRpl)
			// An RST that does not answer the challenge ACK is still
			// checked against the window.
			bad := rst
			bad.seq += 1 << 30
			c.expect("stray RST", c.raw(bad), trkInv)
		})
	}
}

func TestTCPWindowScaling(t *testing.T) {
	tr := newTracker(t, Config{})
	c := newConv(t, tr, "10.3.0.1", "10.3.0.2")
	send := func(fromClient bool, flags uint8, payload int, win uint16, ws int) Result {
		s := spec{proto: protoTCP, flags: flags, payload: payload, win: win, wscale: ws}
		if fromClient {
			s.src, s.dst, s.sport, s.dport, s.seq, s.ack = c.client, c.server, c.cport, c.sport, c.cseq, c.sseq
			c.cseq += uint32(payload)
		} else {
			s.src, s.dst, s.sport, s.dport, s.seq, s.ack = c.server, c.client, c.sport, c.cport, c.sseq, c.cseq
			c.sseq += uint32(payload)
		}
		if flags&tcpSYN != 0 {
			if fromClient {
				c.cseq++
			} else {
				c.sseq++
			}
		}
		return c.raw(s)
	}
	c.expect("SYN", send(true, tcpSYN, 0, 65535, 8), trkNew) // shift 7
	c.expect("SYN-ACK", send(false, tcpSYN|tcpACK, 0, 65535, 8), trkRpl)
	c.expect("ACK", send(true, tcpACK, 0, 1024, 0), trkEst) // 1024<<7 = 128 KiB
	// The server may now send up to the client's scaled window, beyond
	// 64 KiB.
	for i := range 10 {
		c.expect(fmt.Sprintf("segment %d", i), send(false, tcpACK, 10000, 1024, 0), trkRpl)
	}
}
