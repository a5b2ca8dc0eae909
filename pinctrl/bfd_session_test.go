package pinctrl

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func noJitter() float64 { return 0 }

// bfdPair is two sessions joined by a lossless, instant wire, on a fake
// clock that jumps from event to event.
type bfdPair struct {
	a, b   *BFDSession
	now    time.Time
	cut    bool         // drop everything b sends
	lastB  time.Time    // when a last heard b
	sentA  []BFDControl // what a sent, in order
	sentB  []BFDControl
	errors []error
}

func newBFDPair(ca, cb BFDConfig) *bfdPair {
	ca.Jitter, cb.Jitter = noJitter, noJitter
	return &bfdPair{a: NewBFDSession(0x1111, ca, t0), b: NewBFDSession(0x2222, cb, t0), now: t0}
}

// run steps the clock to each event until d has passed.
func (p *bfdPair) run(d time.Duration) {
	end := p.now.Add(d)
	for i := 0; i < 100000; i++ {
		p.flush()
		next := end
		for _, s := range []*BFDSession{p.a, p.b} {
			if e := s.NextEvent(); !e.IsZero() && e.Before(next) {
				next = e
			}
		}
		if next.Before(p.now) {
			next = p.now
		}
		if !next.Before(end) {
			p.now = end
			p.flush()
			return
		}
		p.now = next
	}
	panic("bfdPair.run: no progress")
}

// flush delivers every packet due now, both ways, until none is.
func (p *bfdPair) flush() {
	for n := 0; n < 100; n++ {
		moved := false
		if c, ok := p.a.Advance(p.now); ok {
			moved = true
			p.sentA = append(p.sentA, c)
			p.deliver(p.b, c)
		}
		if c, ok := p.b.Advance(p.now); ok {
			moved = true
			p.sentB = append(p.sentB, c)
			if !p.cut {
				p.deliver(p.a, c)
				p.lastB = p.now
			}
		}
		if !moved {
			return
		}
	}
}

// deliver sends c through the wire format, as the real I/O does.
func (p *bfdPair) deliver(to *BFDSession, c BFDControl) {
	parsed, err := ParseBFDControl(c.Append(nil))
	if err == nil {
		err = to.Receive(&parsed, p.now)
	}
	if err != nil {
		p.errors = append(p.errors, err)
	}
}

func TestBFDSessionsComeUpAndDetectFailure(t *testing.T) {
	p := newBFDPair(BFDConfig{}, BFDConfig{})
	p.run(10 * time.Millisecond)
	if p.a.State() != BFDUp || p.b.State() != BFDUp {
		t.Fatalf("after the first exchange: a %v, b %v; want up, up", p.a.State(), p.b.State())
	}
	if len(p.errors) > 0 {
		t.Fatalf("packets refused: %v", p.errors)
	}
	p.run(10 * time.Second)
	if p.a.State() != BFDUp || p.b.State() != BFDUp || p.a.Polling() || p.b.Polling() {
		t.Fatalf("after 10 s: a %v (poll %v), b %v (poll %v)", p.a.State(), p.a.Polling(), p.b.State(), p.b.Polling())
	}
	// Up: a sends every max(100 ms, b's 1 s min RX) less jitter (none
	// here), so about 10 packets in 10 s, not 100.
	n := len(p.sentA)
	p.run(10 * time.Second)
	if got := len(p.sentA) - n; got < 9 || got > 15 {
		t.Errorf("a sent %d packets in 10 s; want about 10-14 (every 750 ms-1 s)", got)
	}
	// b goes silent: a's detection time is b's multiplier (3) times
	// max(a's min RX 1 s, b's min TX 100 ms) = 3 s after b's last packet.
	p.cut = true
	p.run(p.lastB.Add(2900 * time.Millisecond).Sub(p.now))
	if p.a.State() != BFDUp {
		t.Fatalf("a went %v %v after b's last packet; detection time is 3 s", p.a.State(), p.now.Sub(p.lastB))
	}
	p.run(200 * time.Millisecond)
	if p.a.State() != BFDDown || p.a.Diag() != BFDDiagDetectExpired {
		t.Fatalf("3.1 s after b's last packet: a %v diag %d; want down, diag 1", p.a.State(), p.a.Diag())
	}
	if p.a.RemoteDisc() != 0 {
		t.Errorf("remote discriminator %#x after the detection time; want 0", p.a.RemoteDisc())
	}
	// b hears a say Down and goes Down too (diag 3).
	if p.b.State() != BFDDown || p.b.Diag() != BFDDiagNeighborDown {
		t.Errorf("b %v diag %d; want down, diag 3", p.b.State(), p.b.Diag())
	}
	// The wire heals: both come back up.
	p.cut = false
	p.run(3 * time.Second)
	if p.a.State() != BFDUp || p.b.State() != BFDUp {
		t.Fatalf("after healing: a %v, b %v", p.a.State(), p.b.State())
	}
}

// bfdIn is a packet from the remote (disc 0x99) to a session (disc
// 0x1111) in state st.
func bfdIn(st BFDState) *BFDControl {
	return &BFDControl{Version: 1, State: st, DetectMult: 3, MyDisc: 0x99, YourDisc: 0x1111,
		DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 100 * time.Millisecond}
}

// sessionIn returns a session driven into state st.
func sessionIn(t *testing.T, st BFDState) *BFDSession {
	t.Helper()
	s := NewBFDSession(0x1111, BFDConfig{Jitter: noJitter, AdminDown: st == BFDAdminDown}, t0)
	switch st {
	case BFDInit:
		must(t, s.Receive(&BFDControl{Version: 1, State: BFDDown, DetectMult: 3, MyDisc: 0x99, RequiredMinRx: time.Millisecond}, t0))
	case BFDUp:
		must(t, s.Receive(bfdIn(BFDInit), t0))
	}
	if s.State() != st {
		t.Fatalf("could not drive a session to %v: it is %v", st, s.State())
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestBFDStateTransitions(t *testing.T) {
	// RFC 5880 section 6.8.6's state machine.
	for _, tc := range []struct {
		from, rx BFDState
		want     BFDState
		diag     BFDDiag
	}{
		{BFDDown, BFDDown, BFDInit, BFDDiagNone},
		{BFDDown, BFDInit, BFDUp, BFDDiagNone},
		{BFDDown, BFDUp, BFDDown, BFDDiagNone},
		{BFDDown, BFDAdminDown, BFDDown, BFDDiagNone},
		{BFDInit, BFDDown, BFDInit, BFDDiagNone},
		{BFDInit, BFDInit, BFDUp, BFDDiagNone},
		{BFDInit, BFDUp, BFDUp, BFDDiagNone},
		{BFDInit, BFDAdminDown, BFDDown, BFDDiagNeighborDown},
		{BFDUp, BFDDown, BFDDown, BFDDiagNeighborDown},
		{BFDUp, BFDInit, BFDUp, BFDDiagNone},
		{BFDUp, BFDUp, BFDUp, BFDDiagNone},
		{BFDUp, BFDAdminDown, BFDDown, BFDDiagNeighborDown},
		{BFDAdminDown, BFDDown, BFDAdminDown, BFDDiagAdminDown},
		{BFDAdminDown, BFDInit, BFDAdminDown, BFDDiagAdminDown},
		{BFDAdminDown, BFDUp, BFDAdminDown, BFDDiagAdminDown},
	} {
		s := sessionIn(t, tc.from)
		rx := bfdIn(tc.rx)
		if tc.rx == BFDDown || tc.rx == BFDAdminDown {
			rx.YourDisc = 0 // allowed in these states
		}
		if err := s.Receive(rx, t0.Add(time.Millisecond)); err != nil {
			t.Errorf("%v, receives %v: %v", tc.from, tc.rx, err)
			continue
		}
		if s.State() != tc.want || s.Diag() != tc.diag {
			t.Errorf("%v, receives %v: %v diag %d; want %v diag %d", tc.from, tc.rx, s.State(), s.Diag(), tc.want, tc.diag)
		}
	}
}

func TestBFDDiscriminatorChecks(t *testing.T) {
	s := sessionIn(t, BFDUp)
	bad := bfdIn(BFDUp)
	bad.YourDisc = 0x4242
	if err := s.Receive(bad, t0); !errors.Is(err, ErrBFDYourDisc) {
		t.Errorf("your discriminator of another session: %v; want ErrBFDYourDisc", err)
	}
	zero := bfdIn(BFDUp)
	zero.YourDisc = 0
	if err := s.Receive(zero, t0); !errors.Is(err, ErrBFDNoDisc) {
		t.Errorf("your discriminator zero in state up: %v; want ErrBFDNoDisc", err)
	}
	if st := s.Stats(); st.RxDropped != 2 || s.State() != BFDUp {
		t.Errorf("after two refused packets: %+v, state %v; want 2 dropped, still up", st, s.State())
	}
}

func TestBFDDetectionTimer(t *testing.T) {
	// Detection time = remote mult × max(local min RX, remote min TX).
	for _, tc := range []struct {
		localRx, remoteTx time.Duration
		mult              uint8
		want              time.Duration
	}{
		{300 * time.Millisecond, 100 * time.Millisecond, 3, 900 * time.Millisecond},
		{100 * time.Millisecond, 500 * time.Millisecond, 3, 1500 * time.Millisecond},
		{50 * time.Millisecond, 50 * time.Millisecond, 5, 250 * time.Millisecond},
	} {
		s := NewBFDSession(0x1111, BFDConfig{MinRx: tc.localRx, Jitter: noJitter}, t0)
		in := bfdIn(BFDInit)
		in.DesiredMinTx, in.DetectMult = tc.remoteTx, tc.mult
		must(t, s.Receive(in, t0))
		in.State = BFDUp
		must(t, s.Receive(in, t0))
		// Keep answering its polls so that nothing is pending.
		s.Advance(t0.Add(tc.want - time.Millisecond))
		if s.State() != BFDUp {
			t.Errorf("%+v: down before the detection time", tc)
			continue
		}
		s.Advance(t0.Add(tc.want))
		if s.State() != BFDDown || s.Diag() != BFDDiagDetectExpired {
			t.Errorf("%+v: %v diag %d at the detection time; want down, diag 1", tc, s.State(), s.Diag())
		}
	}
}

func TestBFDSlowTxUntilUp(t *testing.T) {
	s := NewBFDSession(0x1111, BFDConfig{MinTx: 50 * time.Millisecond, MinRx: 50 * time.Millisecond, Jitter: noJitter}, t0)
	c, ok := s.Advance(t0)
	if !ok || c.DesiredMinTx != time.Second || c.State != BFDDown || c.MyDisc != 0x1111 || c.YourDisc != 0 {
		t.Fatalf("first packet %+v (%v); want state down, desired min TX 1 s, your disc 0", c, ok)
	}
	if _, ok := s.Advance(t0.Add(700 * time.Millisecond)); ok {
		t.Errorf("sent again after 700 ms while down; 6.8.3 wants at least 1 s less 25%%")
	}
	if _, ok := s.Advance(t0.Add(750 * time.Millisecond)); !ok {
		t.Errorf("nothing sent 750 ms after the first packet (1 s, 25%% jitter at most)")
	}
}

func TestBFDPollSequence(t *testing.T) {
	fast := BFDConfig{MinTx: 20 * time.Millisecond, MinRx: 20 * time.Millisecond}
	p := newBFDPair(fast, fast)
	p.run(5 * time.Millisecond)
	// Coming up changes the desired min TX from 1 s to 20 ms: a poll.
	var polls, finals int
	for _, c := range p.sentA {
		if c.Poll {
			polls++
		}
	}
	for _, c := range p.sentB {
		if c.Final {
			finals++
		}
	}
	if p.a.State() != BFDUp || polls == 0 || finals == 0 || p.a.Polling() {
		t.Fatalf("coming up: a %v, %d polls from a, %d finals from b, a polling %v; want up, a poll answered", p.a.State(), polls, finals, p.a.Polling())
	}
	p.run(time.Second)
	// A larger TX interval applies only after the poll sequence: cut b
	// so that no F comes back, and a keeps sending every 15 ms (20 ms
	// less 25%) with P set.
	p.cut = true
	n := len(p.sentA)
	p.a.Configure(BFDConfig{MinTx: 200 * time.Millisecond, MinRx: 20 * time.Millisecond, Jitter: noJitter}, p.now)
	p.run(40 * time.Millisecond)
	sent := p.sentA[n:]
	if len(sent) < 3 {
		t.Fatalf("a sent %d packets in 40 ms while its poll is unanswered; want the old rate (every 15 ms)", len(sent))
	}
	for _, c := range sent {
		if !c.Poll || c.DesiredMinTx != 200*time.Millisecond {
			t.Fatalf("packet during the poll %+v; want P and the new desired min TX 200 ms", c)
		}
	}
	// b answers (it has heard the P): the sequence ends and the new rate
	// applies.
	p.cut = false
	p.run(10 * time.Millisecond)
	if p.a.Polling() {
		t.Fatalf("a still polling after b's F")
	}
	n = len(p.sentA)
	p.run(time.Second)
	if got := len(p.sentA) - n; got < 5 || got > 7 {
		t.Errorf("a sent %d packets in 1 s after the poll; want about 6 (every 150 ms)", got)
	}
}

func TestBFDRemoteMinRxZero(t *testing.T) {
	s := sessionIn(t, BFDUp)
	in := bfdIn(BFDUp)
	in.RequiredMinRx = 0
	must(t, s.Receive(in, t0))
	for s.NextEvent().Before(t0.Add(time.Millisecond)) && !s.NextEvent().IsZero() {
		s.Advance(t0.Add(time.Millisecond))
	}
	if _, ok := s.Advance(t0.Add(10 * time.Millisecond)); ok {
		t.Fatalf("periodic packet sent to a remote whose required min RX is 0")
	}
	// A poll is still answered.
	in.Poll = true
	must(t, s.Receive(in, t0.Add(20*time.Millisecond)))
	c, ok := s.Advance(t0.Add(20 * time.Millisecond))
	if !ok || !c.Final || c.Poll {
		t.Fatalf("answer to a poll: %+v (%v); want F without P", c, ok)
	}
}

func TestBFDAdminDown(t *testing.T) {
	p := newBFDPair(BFDConfig{}, BFDConfig{})
	p.run(100 * time.Millisecond)
	p.a.Configure(BFDConfig{AdminDown: true}, p.now)
	p.run(10 * time.Millisecond)
	if p.a.State() != BFDAdminDown || p.a.Diag() != BFDDiagAdminDown {
		t.Fatalf("a %v diag %d; want admin_down, diag 7", p.a.State(), p.a.Diag())
	}
	if p.b.State() != BFDDown || p.b.Diag() != BFDDiagNeighborDown {
		t.Fatalf("b %v diag %d after a went admin down; want down, diag 3", p.b.State(), p.b.Diag())
	}
	p.run(10 * time.Second) // b's packets are ignored, no detection timer
	if p.a.State() != BFDAdminDown {
		t.Fatalf("a left admin_down by itself: %v", p.a.State())
	}
	p.a.Configure(BFDConfig{}, p.now)
	p.run(3 * time.Second)
	if p.a.State() != BFDUp || p.b.State() != BFDUp {
		t.Fatalf("after admin up: a %v, b %v; want up, up", p.a.State(), p.b.State())
	}
}

func TestBFDJitter(t *testing.T) {
	// 75-100% of the interval, 75-90% with a multiplier of 1.
	for _, tc := range []struct {
		mult     uint8
		j        float64
		min, max time.Duration
	}{
		{3, 0, 750 * time.Millisecond, 750 * time.Millisecond},
		{3, 0.999, 990 * time.Millisecond, time.Second},
		{1, 0.999, 890 * time.Millisecond, 900 * time.Millisecond},
	} {
		j := tc.j
		s := NewBFDSession(7, BFDConfig{DetectMult: tc.mult, Jitter: func() float64 { return j }}, t0)
		s.Advance(t0)
		got := s.NextEvent().Sub(t0)
		if got < tc.min || got > tc.max {
			t.Errorf("mult %d jitter %v: next packet after %v; want %v-%v", tc.mult, tc.j, got, tc.min, tc.max)
		}
	}
	// The built-in generator stays in range.
	s := NewBFDSession(12345, BFDConfig{}, t0)
	for i := 0; i < 1000; i++ {
		if r := s.rand(); r < 0 || r >= 1 {
			t.Fatalf("rand() = %v", r)
		}
	}
}
