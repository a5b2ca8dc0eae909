package pinctrl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
)

// vportState is testState with a virtual port "vip" on the switch (key
// 2, tunnel key 5) and a second port sw0-p2 (key 2).
func vportState() *State {
	st := testState()
	d := st.Datapaths[2]
	d.Ports["vip"], d.PortNames[5] = 5, "vip"
	d.Ports["sw0-p2"], d.PortNames[2] = 2, "sw0-p2"
	st.VPorts = map[string]VPort{"vip": {Datapath: 2}}
	st.Events = map[string]bool{}
	return st
}

// TestBindVport: bind_vport("V", inport) names the virtual port and the
// parent the packet came in on; a port that is not virtual, or not on
// the switch, or an unknown inport, is an error.
func TestBindVport(t *testing.T) {
	e := newEngine(t)
	st := vportState()
	st.Datapaths[1].Ports["lr-vip"] = 9
	st.VPorts["lr-vip"] = VPort{Datapath: 1}
	frame := ethFrame(broadcastMAC, vmMAC, etherARP, make([]byte, 28))
	for _, tc := range []struct {
		name, action string
		inport       uint64
		want         VPortBinding
		err          string
	}{
		{"parent p1", `bind_vport("vip", inport);`, 1, VPortBinding{"vip", "sw0-p1"}, ""},
		{"parent p2", `bind_vport("vip", inport);`, 2, VPortBinding{"vip", "sw0-p2"}, ""},
		{"not virtual", `bind_vport("sw0-p2", inport);`, 1, VPortBinding{}, "no virtual port"},
		{"virtual elsewhere", `bind_vport("lr-vip", inport);`, 1, VPortBinding{}, "no virtual port"},
		{"unknown inport", `bind_vport("vip", inport);`, 7, VPortBinding{}, "unknown logical port 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.Handle(packetIn(tc.action, frame, 2, 20, map[int]uint64{14: tc.inport}), st)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out.VPorts) != 1 || out.VPorts[0] != tc.want || len(out.Packets) != 0 {
				t.Errorf("output %+v, want %+v", out, tc.want)
			}
		})
	}
}

// TestLearnVPort: a binding the Southbound has, or one sent less than
// recentTTL ago, is a duplicate; a new parent is sent, and so is the
// same again once recentTTL has passed without the Southbound having it
// (another chassis took the port meanwhile).
func TestLearnVPort(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := vportState()
	st.VPorts["vip"] = VPort{Datapath: 2, Parent: "sw0-p1", Here: true}
	now := time.Unix(1700000000, 0)
	p.learnVPort(VPortBinding{"vip", "sw0-p1"}, st, now) // the Southbound's
	p.learnVPort(VPortBinding{"vip", "sw0-p2"}, st, now) // moved to p2
	p.learnVPort(VPortBinding{"vip", "sw0-p2"}, st, now.Add(time.Second))
	s := p.Stats().VPorts
	if s.Learned != 1 || s.Duplicates != 2 || len(p.vports) != 1 {
		t.Errorf("stats %+v, %d queued; want 1 learned, 2 duplicates", s, len(p.vports))
	}
	if b := <-p.vports; b != (VPortBinding{"vip", "sw0-p2"}) {
		t.Errorf("queued %+v", b)
	}
	p.learnVPort(VPortBinding{"vip", "sw0-p2"}, st, now.Add(recentTTL))
	if s := p.Stats().VPorts; s.Learned != 2 {
		t.Errorf("after recentTTL: stats %+v, want 2 learned", s)
	}
}

const lbUUID = "7f1fcd3d-2b6a-4b7e-8a54-5b7d5b0a6c11"

// TestTriggerEvent: trigger_event for an empty load balancer raises an
// empty_lb_backends event with the VIP, protocol and load balancer.
func TestTriggerEvent(t *testing.T) {
	e := newEngine(t)
	st := vportState()
	frame := tcpFrame(vmIP, farIP, 0x02, 0)
	for _, tc := range []struct {
		name, action string
		want         map[string]string
		err          string
	}{
		{"tcp vip", `trigger_event(event = "empty_lb_backends", vip = "10.0.0.10:80", protocol = "tcp", load_balancer = "` + lbUUID + `");`,
			map[string]string{"vip": "10.0.0.10:80", "protocol": "tcp", "load_balancer": lbUUID}, ""},
		{"ipv6 udp vip", `trigger_event(event = "empty_lb_backends", vip = "[aef0::10]:53", protocol = "udp", load_balancer = "` + lbUUID + `");`,
			map[string]string{"vip": "[aef0::10]:53", "protocol": "udp", "load_balancer": lbUUID}, ""},
		{"no load balancer", `trigger_event(event = "empty_lb_backends", vip = "10.0.0.10:80", protocol = "tcp");`, nil, "no load_balancer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.Handle(packetIn(tc.action, frame, 2, 20, nil), st)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Events) != 1 || out.Events[0].Type != "empty_lb_backends" || eventKey("empty_lb_backends", tc.want) != out.Events[0].Key() {
				t.Errorf("events %+v, want %v", out.Events, tc.want)
			}
		})
	}
}

// TestRaiseEvent: an event whose row this chassis has, or that was sent
// less than recentTTL ago, is not sent again; another VIP's is, and the
// same once recentTTL has passed without its row (the CMS deleted it).
func TestRaiseEvent(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := vportState()
	a := ControllerEvent{"empty_lb_backends", map[string]string{"vip": "10.0.0.10:80", "protocol": "tcp", "load_balancer": lbUUID}}
	b := ControllerEvent{"empty_lb_backends", map[string]string{"vip": "10.0.0.11:80", "protocol": "tcp", "load_balancer": lbUUID}}
	st.Events[a.Key()] = true
	now := time.Unix(1700000000, 0)
	p.raiseEvent(a, st, now)
	p.raiseEvent(b, st, now)
	p.raiseEvent(b, st, now.Add(time.Second))
	if s := p.Stats().Events; s.Learned != 1 || s.Duplicates != 2 || len(p.events) != 1 {
		t.Errorf("stats %+v, %d queued", s, len(p.events))
	}
	p.raiseEvent(b, st, now.Add(recentTTL))
	if s := p.Stats().Events; s.Learned != 2 {
		t.Errorf("after recentTTL: stats %+v, want 2 raised", s)
	}
}

// TestNestedFromController: the packet a nested action builds enters
// the pipeline from the controller, not from the packet-in's port, so
// that reject's answer output to that port is not dropped as output to
// the input port; a resumed packet keeps its port.
func TestNestedFromController(t *testing.T) {
	e := newEngine(t)
	st := testState()
	out, err := e.Handle(packetIn("reject { outport <-> inport; output; };", tcpFrame(vmIP, farIP, 0x02, 0), 2, 28, nil), st)
	if err != nil || len(out.Packets) != 1 {
		t.Fatalf("%+v, %v", out, err)
	}
	if in := out.Packets[0].Key.Get(flow.InPort); in != controllerPort {
		t.Errorf("nested packet-out in_port %#x, want the controller's %#x", in, controllerPort)
	}
	pi := packetIn("reg0[4] = dns_lookup();", udpFrame(routerMAC, vmIP, farIP, 5000, 53, []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 'v', 'm', '1', 0, 0, 1, 0, 1}), 2, 28, nil)
	pi.Cont = &flow.Continuation{Table: 28}
	out, err = e.Handle(pi, st)
	if err != nil || len(out.Packets) != 1 {
		t.Fatalf("%+v, %v", out, err)
	}
	if in := out.Packets[0].Key.Get(flow.InPort); in != 1 {
		t.Errorf("resumed packet-out in_port %d, want the packet-in's 1", in)
	}
}

// chanSwitch delivers the packet-ins sent on ins.
type chanSwitch struct {
	countingSwitch
	ins chan dp.PacketIn
}

func (s *chanSwitch) PacketIns() <-chan dp.PacketIn { return s.ins }

// TestVPortAndEventWritersWithoutSouthbound: a Pinctrl running without
// a Southbound takes bind_vport's and trigger_event's packet-ins, and
// its writers count the failed writes instead of crashing.
func TestVPortAndEventWritersWithoutSouthbound(t *testing.T) {
	sw := &chanSwitch{ins: make(chan dp.PacketIn, 4)}
	p, err := New(Config{Switch: sw})
	if err != nil {
		t.Fatal(err)
	}
	p.fixedState = vportState()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	sw.ins <- *packetIn(`bind_vport("vip", inport);`, ethFrame(broadcastMAC, vmMAC, etherARP, make([]byte, 28)), 2, 20, nil)
	sw.ins <- *packetIn(`trigger_event(event = "empty_lb_backends", vip = "10.0.0.10:80", protocol = "tcp", load_balancer = "`+lbUUID+`");`,
		tcpFrame(vmIP, farIP, 0x02, 0), 2, 20, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := p.Stats()
		if s.VPorts.WriteFails > 0 && s.Events.WriteFails > 0 {
			if s.Kinds["bind_vport"].Handled != 1 || s.Kinds["trigger_event"].Handled != 1 {
				t.Errorf("kinds %+v", s.Kinds)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed writes counted: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
