package conntrack

import (
	"testing"
	"time"
)

func newTracker(t *testing.T, cfg Config) *Tracker {
	tr := New(cfg)
	t.Cleanup(tr.Close)
	return tr
}

func TestUDPNewEstablishedReply(t *testing.T) {
	tr := newTracker(t, Config{})
	out := spec{src: "10.0.0.1", dst: "10.0.0.2", proto: protoUDP, sport: 1000, dport: 53}
	back := spec{src: "10.0.0.2", dst: "10.0.0.1", proto: protoUDP, sport: 53, dport: 1000}
	steps := []struct {
		name string
		s    spec
		p    Params
		want State
	}{
		{"uncommitted", out, Params{Zone: 1}, StateTracked | StateNew},
		{"commit", out, Params{Zone: 1, Commit: true, Mark: 7, MarkMask: 0xff}, StateTracked | StateNew},
		{"again before reply", out, Params{Zone: 1}, StateTracked | StateNew},
		{"other zone", back, Params{Zone: 2}, StateTracked | StateNew},
		{"reply", back, Params{Zone: 1}, StateTracked | StateEstablished | StateReply},
		{"after reply", out, Params{Zone: 1}, StateTracked | StateEstablished},
	}
	for i, st := range steps {
		res := tr.Process(build(st.s), 0, st.p, time.Duration(i)*time.Second)
		if res.State != st.want {
			t.Errorf("%s: state %v, want %v (%v)", st.name, res.State, st.want, res.Reason)
		}
		if st.p.Zone == 1 && i > 0 && res.Mark != 7 {
			t.Errorf("%s: mark %d, want 7", st.name, res.Mark)
		}
	}
}
