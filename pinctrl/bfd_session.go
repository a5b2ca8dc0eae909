package pinctrl

import (
	"errors"
	"time"
)

// BFDSession is one BFD session in asynchronous mode (RFC 5880): its
// state machine and timers, without I/O. The caller hands it the
// packets it receives (Receive) and asks it, at NextEvent or later, what
// to send (Advance); time is whatever the caller says it is, so tests
// drive it with a fake clock.
//
// What it does, by RFC 5880's sections:
//
//   - 6.2, 6.8.6: Down → Init on a Down packet, Down/Init → Up on an Init
//     or Up packet, Up → Down when the neighbor says Down or AdminDown
//     (diag 3), Init/Up → Down when the detection time passes without a
//     packet (diag 1); AdminDown while configured so (diag 7), and it
//     ignores what it receives then.
//   - 6.8.2, 6.8.4: the detection time is the remote detect multiplier
//     times the larger of the local required min RX and the remote
//     desired min TX.
//   - 6.8.3: while not Up it advertises a desired min TX of at least one
//     second. A change of its intervals while Up (the change from one
//     second to the configured TX when it comes Up, among others) runs a
//     poll sequence: P set until a packet with F comes back; a larger TX
//     interval, or a smaller RX interval, takes effect only then.
//   - 6.8.7: it sends every max(desired min TX, remote required min RX),
//     less 0-25% jitter (0-10% more with a detect multiplier of 1), never
//     periodically when the remote's required min RX is zero; a packet
//     with P is answered at once with F.
//
// Beyond the RFC's letter, as Open vSwitch and FRR do: a state change
// sends a packet at once rather than at the next interval, so that the
// two ends converge in one round trip.
//
// The zero BFDSession is not usable: make one with NewBFDSession.
type BFDSession struct {
	cfg       BFDConfig
	localDisc uint32
	state     BFDState
	diag      BFDDiag

	remoteDisc  uint32
	remoteState BFDState
	remoteMinRx time.Duration // bfd.RemoteMinRxInterval
	remoteMinTx time.Duration // the remote's desired min TX
	remoteMult  uint8

	advTx, advRx         time.Duration // what the packets advertise
	txApplied, rxApplied time.Duration // what the timers use (6.8.3)
	poll                 bool          // a poll sequence runs
	finalOwed            bool          // a packet with P wants an F
	finalAt              time.Time     // since when

	nextTx   time.Time // zero: nothing periodic to send
	detectAt time.Time // zero: no detection timer

	jitter func() float64
	rng    uint64

	stats BFDSessionStats
}

// BFDConfig is a session's local parameters.
type BFDConfig struct {
	MinTx      time.Duration // desired min TX interval once Up
	MinRx      time.Duration // required min RX interval; negative: 0, send me nothing
	DetectMult uint8
	AdminDown  bool
	// Jitter, if set, returns numbers in [0, 1) that pick each interval's
	// jitter (tests: a constant). Unset, a generator seeded by the local
	// discriminator.
	Jitter func() float64
}

// BFDSessionStats count a session's packets and changes.
type BFDSessionStats struct {
	RxPackets uint64 // accepted
	RxDropped uint64 // refused by the session (discriminator, state)
	TxPackets uint64
	Changes   uint64 // state changes
	Last      time.Time
}

// Default BFD parameters, as Open vSwitch's for tunnel interfaces:
// detection in about 3 s.
const (
	DefaultBFDMinTx      = 100 * time.Millisecond
	DefaultBFDMinRx      = 1000 * time.Millisecond
	DefaultBFDDetectMult = 3
	bfdSlowTx            = time.Second // 6.8.3: the least desired min TX while not Up
)

// Errors of BFDSession.Receive.
var (
	ErrBFDYourDisc = errors.New("bfd: your discriminator is not this session's")
	ErrBFDNoDisc   = errors.New("bfd: your discriminator zero in state init or up")
)

// same reports whether c and o have the same parameters (the jitter
// source aside).
func (c BFDConfig) same(o BFDConfig) bool {
	return c.MinTx == o.MinTx && c.MinRx == o.MinRx && c.DetectMult == o.DetectMult && c.AdminDown == o.AdminDown
}

// withDefaults fills a config's zero fields.
func (c BFDConfig) withDefaults() BFDConfig {
	if c.MinTx <= 0 {
		c.MinTx = DefaultBFDMinTx
	}
	switch {
	case c.MinRx == 0:
		c.MinRx = DefaultBFDMinRx
	case c.MinRx < 0:
		c.MinRx = 0
	}
	if c.DetectMult == 0 {
		c.DetectMult = DefaultBFDDetectMult
	}
	return c
}

// NewBFDSession returns a session in state Down (AdminDown if cfg says
// so) with local discriminator disc (nonzero), whose first packet is due
// at now. A zero MinTx, MinRx or DetectMult takes the default.
func NewBFDSession(disc uint32, cfg BFDConfig, now time.Time) *BFDSession {
	if disc == 0 {
		disc = 1
	}
	s := &BFDSession{cfg: cfg.withDefaults(), localDisc: disc, state: BFDDown, remoteMinRx: time.Microsecond,
		jitter: cfg.Jitter, rng: uint64(disc)*0x9e3779b97f4a7c15 | 1, nextTx: now}
	if s.cfg.AdminDown {
		s.state, s.diag = BFDAdminDown, BFDDiagAdminDown
	}
	s.advTx, s.advRx = s.desiredTx(), s.cfg.MinRx
	s.txApplied, s.rxApplied = s.advTx, s.advRx
	return s
}

// State is the session's state.
func (s *BFDSession) State() BFDState { return s.state }

// Diag is the session's diagnostic: why it last went down.
func (s *BFDSession) Diag() BFDDiag { return s.diag }

// LocalDisc and RemoteDisc are the session's discriminators (the remote
// one zero until a packet arrives, and again after the detection time
// expires).
func (s *BFDSession) LocalDisc() uint32  { return s.localDisc }
func (s *BFDSession) RemoteDisc() uint32 { return s.remoteDisc }

// RemoteState is the state the remote last reported.
func (s *BFDSession) RemoteState() BFDState { return s.remoteState }

// Polling reports whether a poll sequence runs.
func (s *BFDSession) Polling() bool { return s.poll }

// Stats returns the session's counters.
func (s *BFDSession) Stats() BFDSessionStats { return s.stats }

// Config returns the session's configuration, defaults filled in.
func (s *BFDSession) Config() BFDConfig { return s.cfg }

// desiredTx is the desired min TX interval to advertise now.
func (s *BFDSession) desiredTx() time.Duration {
	if s.state != BFDUp {
		return max(s.cfg.MinTx, bfdSlowTx)
	}
	return s.cfg.MinTx
}

// Configure changes the session's parameters at now.
func (s *BFDSession) Configure(cfg BFDConfig, now time.Time) {
	cfg = cfg.withDefaults()
	if cfg.Jitter == nil {
		cfg.Jitter = s.cfg.Jitter
	}
	old := s.state
	s.cfg = cfg
	s.jitter = cfg.Jitter
	switch {
	case cfg.AdminDown && s.state != BFDAdminDown:
		s.setState(BFDAdminDown, BFDDiagAdminDown, now)
	case !cfg.AdminDown && s.state == BFDAdminDown:
		s.setState(BFDDown, BFDDiagNone, now)
	}
	if s.state == old {
		s.retime(now)
	}
}

// setState moves the session to st with diag and sends a packet at once.
func (s *BFDSession) setState(st BFDState, diag BFDDiag, now time.Time) {
	if st == s.state {
		return
	}
	s.state, s.diag = st, diag
	s.stats.Changes++
	s.stats.Last = now
	if st != BFDUp {
		s.poll = false // a poll sequence is for an Up session
	}
	s.retime(now)
	s.nextTx = now
}

// retime applies a change of the advertised intervals (6.8.3).
func (s *BFDSession) retime(now time.Time) {
	tx, rx := s.desiredTx(), s.cfg.MinRx
	if tx == s.advTx && rx == s.advRx {
		return
	}
	s.advTx, s.advRx = tx, rx
	if s.state != BFDUp {
		s.txApplied, s.rxApplied = tx, rx
		return
	}
	// Up: what is safe applies now (sending faster, accepting slower);
	// the rest once the remote has acknowledged with F.
	s.txApplied = min(s.txApplied, tx)
	s.rxApplied = max(s.rxApplied, rx)
	s.poll = true
	s.nextTx = now
}

// detectTime is the detection time (6.8.4), zero before the remote is
// heard.
func (s *BFDSession) detectTime() time.Duration {
	return time.Duration(s.remoteMult) * max(s.rxApplied, s.remoteMinTx)
}

// Receive takes a control packet that ParseBFDControl accepted, at now.
// An error says why the session refused it (the packet is dropped and
// counted). After it, Advance(now) sends whatever the packet calls for
// (an F, a state change).
func (s *BFDSession) Receive(p *BFDControl, now time.Time) error {
	switch {
	case p.YourDisc != 0 && p.YourDisc != s.localDisc:
		s.stats.RxDropped++
		return ErrBFDYourDisc
	case p.YourDisc == 0 && p.State != BFDDown && p.State != BFDAdminDown:
		s.stats.RxDropped++
		return ErrBFDNoDisc
	}
	s.stats.RxPackets++
	s.remoteDisc = p.MyDisc
	s.remoteState = p.State
	s.remoteMinRx = p.RequiredMinRx
	s.remoteMinTx = p.DesiredMinTx
	s.remoteMult = p.DetectMult
	if p.Final && s.poll {
		s.poll = false
		s.txApplied, s.rxApplied = s.advTx, s.advRx
	}
	if s.state == BFDAdminDown {
		return nil
	}
	if p.State == BFDAdminDown {
		if s.state != BFDDown {
			s.setState(BFDDown, BFDDiagNeighborDown, now)
		}
	} else {
		switch s.state {
		case BFDDown:
			switch p.State {
			case BFDDown:
				s.setState(BFDInit, BFDDiagNone, now)
			case BFDInit:
				s.setState(BFDUp, BFDDiagNone, now)
			}
		case BFDInit:
			if p.State == BFDInit || p.State == BFDUp {
				s.setState(BFDUp, BFDDiagNone, now)
			}
		case BFDUp:
			if p.State == BFDDown {
				s.setState(BFDDown, BFDDiagNeighborDown, now)
			}
		}
	}
	s.detectAt = now.Add(s.detectTime())
	if p.Poll {
		s.finalOwed, s.finalAt = true, now
	}
	if s.nextTx.IsZero() && s.remoteMinRx > 0 {
		s.nextTx = now // the remote asks for packets again
	}
	return nil
}

// NextEvent is when Advance has something to do next: a packet to send
// or the detection time to expire (zero if neither is pending).
func (s *BFDSession) NextEvent() time.Time {
	if s.finalOwed {
		return s.finalAt
	}
	next := s.nextTx
	if !s.detectAt.IsZero() && (next.IsZero() || s.detectAt.Before(next)) {
		next = s.detectAt
	}
	return next
}

// Advance runs the session's timers up to now and returns the packet to
// send, if one is due (at most one: call it again at NextEvent).
func (s *BFDSession) Advance(now time.Time) (BFDControl, bool) {
	if !s.detectAt.IsZero() && !now.Before(s.detectAt) {
		s.detectAt = time.Time{}
		s.remoteDisc, s.remoteState, s.remoteMult = 0, BFDDown, 0
		s.remoteMinRx = time.Microsecond // talk to whoever comes back
		if s.state == BFDInit || s.state == BFDUp {
			s.setState(BFDDown, BFDDiagDetectExpired, now)
		}
	}
	due := s.finalOwed || !s.nextTx.IsZero() && !now.Before(s.nextTx)
	if !due {
		return BFDControl{}, false
	}
	p := BFDControl{Version: bfdVersion, Diag: s.diag, State: s.state, DetectMult: s.cfg.DetectMult,
		MyDisc: s.localDisc, YourDisc: s.remoteDisc, DesiredMinTx: s.advTx, RequiredMinRx: s.advRx}
	if s.finalOwed {
		p.Final = true
		s.finalOwed = false
	} else {
		p.Poll = s.poll
	}
	s.stats.TxPackets++
	if s.remoteMinRx == 0 {
		s.nextTx = time.Time{} // 6.8.7: no periodic packets
	} else if !s.nextTx.IsZero() && !now.Before(s.nextTx) {
		s.nextTx = now.Add(s.interval())
	}
	return p, true
}

// interval is the next transmit interval with its jitter (6.8.7).
func (s *BFDSession) interval() time.Duration {
	iv := max(s.txApplied, s.remoteMinRx)
	j := s.rand()
	frac := 0.75 + 0.25*j // 75-100%
	if s.cfg.DetectMult == 1 {
		frac = 0.75 + 0.15*j // 75-90%
	}
	return time.Duration(float64(iv) * frac)
}

// rand returns a number in [0, 1).
func (s *BFDSession) rand() float64 {
	if s.jitter != nil {
		j := s.jitter()
		if j < 0 || j >= 1 {
			return 0
		}
		return j
	}
	s.rng ^= s.rng << 13
	s.rng ^= s.rng >> 7
	s.rng ^= s.rng << 17
	return float64(s.rng>>11) / (1 << 53)
}
