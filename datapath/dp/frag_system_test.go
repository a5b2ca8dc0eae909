package dp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/systest/netns"
)

// udpToolEnv makes the test binary run udpTool instead of the tests: the
// system test starts it inside a namespace.
const udpToolEnv = "GOVN_DP_UDP_TOOL"

func TestMain(m *testing.M) {
	if os.Getenv(udpToolEnv) != "" {
		if err := udpTool(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// udpPayload is the datagram the system test sends: 3000 bytes, which
// the sending kernel splits into fragments at the veth's MTU of 1500.
var udpPayload = bytes.Repeat([]byte("govn fragments."), 200)

// udpTool is "echo ADDR" (answer one datagram on ADDR with its bytes) or
// "send DST" (send udpPayload to DST until the same bytes come back).
func udpTool(args []string) error {
	if len(args) != 2 {
		return errors.New("udp tool: expected echo ADDR or send DST")
	}
	switch args[0] {
	case "echo":
		c, err := net.ListenPacket("udp4", args[1])
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Println("listening")
		buf := make([]byte, 65536)
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return err
		}
		for range 3 { // the sender may miss one answer
			if _, err := c.WriteTo(buf[:n], from); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	case "send":
		c, err := net.Dial("udp4", args[1])
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 65536)
		for range 10 {
			if _, err := c.Write(udpPayload); err != nil {
				return err
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, err := c.Read(buf)
			if err != nil {
				continue
			}
			if !bytes.Equal(buf[:n], udpPayload) {
				return fmt.Errorf("udp tool: answer of %d bytes differs from the %d sent", n, len(udpPayload))
			}
			return nil
		}
		return errors.New("udp tool: no answer")
	}
	return fmt.Errorf("udp tool: unknown mode %q", args[0])
}

// TestFragmentedUDPThroughConntrackSystem sends a 3000-byte UDP datagram,
// fragmented by the sending kernel, between two namespaces through a
// stateful ct(commit) pipeline, and gets it back: both directions are
// reassembled before conntrack (else the fragments would be invalid and
// dropped) and refragmented to fit the 1500-byte MTU on output.
func TestFragmentedUDPThroughConntrackSystem(t *testing.T) {
	type host struct {
		*netns.Veth
		no  uint32
		mac uint64
	}
	var hs [2]host
	for i := range hs {
		ns := netns.New(t)
		mac := fmt.Sprintf("02:00:00:00:81:%02x", i+1)
		hs[i] = host{Veth: netns.NewVeth(t, ns, fmt.Sprintf("10.81.0.%d/24", i+1), mac), no: uint32(i + 1), mac: 0x020000008100 + uint64(i+1)}
	}
	p := dp.NewPipeline()
	tr := conntrack.New(conntrack.Config{})
	t.Cleanup(tr.Close)
	d, err := dp.New(dp.Config{Flows: p, Conntrack: tr})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		pt, err := port.NewAFPacket(h.Outer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pt.Close() })
		if err := d.AddPort(h.no, pt); err != nil {
			t.Fatal(err)
		}
	}

	// IP goes through ct(zone=1); new connections are committed,
	// established ones pass, invalid ones are dropped; then a MAC table.
	var b flow.Bundle
	ip, arp, newConn, est := flow.Match{}, flow.Match{}, flow.Match{}, flow.Match{}
	ip.Set(flow.EthType, 0x0800)
	arp.Set(flow.EthType, 0x0806)
	trk, inv := uint64(conntrack.StateTracked), uint64(conntrack.StateInvalid)
	newConn.SetMasked(flow.CTState, trk|uint64(conntrack.StateNew), trk|inv|uint64(conntrack.StateNew))
	est.SetMasked(flow.CTState, trk|uint64(conntrack.StateEstablished), trk|inv|uint64(conntrack.StateEstablished))
	b.Add(flow.Rule{Table: 0, Priority: 100, Match: ip, Actions: []flow.Action{flow.CT{Zone: 1, Table: 1}}})
	b.Add(flow.Rule{Table: 0, Priority: 100, Match: arp, Actions: []flow.Action{flow.GotoTable{Table: 2}}})
	b.Add(flow.Rule{Table: 1, Priority: 100, Match: newConn, Actions: []flow.Action{flow.CT{Zone: 1, Commit: true, Table: flow.CTNoTable}, flow.GotoTable{Table: 2}}})
	b.Add(flow.Rule{Table: 1, Priority: 100, Match: est, Actions: []flow.Action{flow.GotoTable{Table: 2}}})
	for i, h := range hs {
		var m, bc flow.Match
		m.Set(flow.EthDst, h.mac)
		b.Add(flow.Rule{Table: 2, Priority: 100, Match: m, Actions: []flow.Action{flow.Output{Port: h.no}}})
		bc.Set(flow.EthDst, 0xffffffffffff)
		bc.Set(flow.InPort, uint64(h.no))
		b.Add(flow.Rule{Table: 2, Priority: 100, Match: bc, Actions: []flow.Action{flow.Output{Port: hs[1-i].no}}})
	}
	if _, err := p.Apply(b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer tcancel()
	echo := hs[1].NS.Command(tctx, self, "echo", hs[1].Addr+":7007")
	echo.Env = append(os.Environ(), udpToolEnv+"=1")
	var echoOut bytes.Buffer
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	echo.Stdout, echo.Stderr = pw, &echoOut
	if err := echo.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { _ = echo.Process.Kill(); _ = echo.Wait() })
	if _, err := pr.Read(make([]byte, 16)); err != nil { // "listening"
		t.Fatalf("echo tool did not start: %v %s", err, echoOut.String())
	}
	send := hs[0].NS.Command(tctx, self, "send", hs[1].Addr+":7007")
	send.Env = append(os.Environ(), udpToolEnv+"=1")
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("send: %v\n%s\nechoer: %s\ndatapath %+v", err, out, echoOut.String(), d.Stats())
	}
	s := d.Stats()
	t.Logf("3000-byte UDP datagram and its echo through ct(commit): datapath %+v", s)
	if s.Reassembled < 2 || s.FragDrops != 0 {
		t.Errorf("reassembled %d datagrams, dropped %d fragments; want at least 2 and 0", s.Reassembled, s.FragDrops)
	}
}
