package port

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/govn/govn/bench/procstat"
	"github.com/govn/govn/datapath/systest/netns"
)

// ringsPerPortBudget is what an idle AF_PACKET port's two rings may keep
// resident: 128 slots of 2 KiB each.
const ringsPerPortBudget = 512 << 10

// TestAFPacketResidentPerPort opens idle ports and reads how much more
// memory the process holds resident (procstat: /proc/self/smaps), per
// port: hundreds of VIFs on a hypervisor must not cost megabytes each.
// The rings (mapped from the sockets) are what it checks; the heap's
// share is logged, as the garbage of other tests moves it by more than a
// port's batches weigh.
func TestAFPacketResidentPerPort(t *testing.T) {
	const n = 8
	ns := netns.New(t)
	var names []string
	for i := range n {
		v := netns.NewVeth(t, ns, fmt.Sprintf("10.79.0.%d/24", i+1), fmt.Sprintf("02:00:00:00:79:%02x", i+1))
		names = append(names, v.Outer)
	}
	before := resident(t)
	for _, name := range names {
		openAFPacket(t, name)
	}
	after := resident(t)
	socket := (after.Socket - before.Socket) / n
	total := (after.Total() - before.Total()) / n
	t.Logf("resident per idle port: %d KiB (%d KiB rings, %d KiB anonymous)", total>>10, socket>>10, (after.Anon-before.Anon)/n>>10)
	if socket <= 0 {
		t.Errorf("rings mapped %d bytes per port: not measured", socket)
	}
	if socket > ringsPerPortBudget {
		t.Errorf("%d KiB of rings resident per idle port, budget %d KiB", socket>>10, ringsPerPortBudget>>10)
	}
}

func resident(t *testing.T) procstat.Resident {
	t.Helper()
	runtime.GC()
	r, err := procstat.ResidentByKind(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAFPacketRingsGrow floods a port's small receive ring while nothing
// reads it: the first read finds it more than half full, and the ring
// grows to its full size. The transmit ring grows (as Send does when the
// kernel still holds every slot after a flush), and both ports still
// carry a TCP transfer after growing.
func TestAFPacketRingsGrow(t *testing.T) {
	ns1, ns2 := netns.New(t), netns.New(t)
	v1 := netns.NewVeth(t, ns1, "10.80.0.1/24", "02:00:00:00:80:01")
	v2 := netns.NewVeth(t, ns2, "10.80.0.2/24", "02:00:00:00:80:02")
	p1, p2 := openAFPacket(t, v1.Outer), openAFPacket(t, v2.Outer)
	if p1.ring.frames != rxRingFrames || p2.txr.frames != txFrames {
		t.Fatalf("rings start with %d and %d slots, want %d and %d", p1.ring.frames, p2.txr.frames, rxRingFrames, txFrames)
	}
	udpBlastFill(t, ns1, v1.Inner, "10.80.0.2", "02:00:00:00:80:02", "0.3", 60*time.Second, rxRingFrames)
	pkts := make([]*Packet, BatchSize)
	for i := range pkts {
		pkts[i] = NewPacket(MaxFrame)
	}
	if n, err := p1.Recv(pkts); err != nil || n != len(pkts) {
		t.Fatalf("Recv from a full ring: %d frames, %v; want %d", n, err, len(pkts))
	}
	if p1.ring == nil || p1.ring.frames != rxRingFramesMax {
		t.Fatalf("receive ring after reading a full one: %+v, want %d slots", p1.ring, rxRingFramesMax)
	}
	p2.txMu.Lock()
	grown := p2.growTxRing()
	p2.txMu.Unlock()
	if !grown || p2.txr.frames != txFramesMax {
		t.Fatalf("transmit ring did not grow to %d slots", txFramesMax)
	}

	wire(t, p1, p2)
	ns2.Serve(t, "tcp-sink", v2.Addr+":5001")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, err := ns1.Tool(ctx, "tcp-send", v2.Addr+":5001", "20000000")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tcp-send through grown rings: %v\n%s", err, out)
	}
}
