package conntrack

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time of the calling OS thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs f(0), f(1), ... under b.Loop on one locked OS thread and
// reports perOp packets per call of f per second of that thread's CPU time,
// which, unlike ns/op, does not count the time other processes of a shared
// machine held the core.
func loopCPU(b *testing.B, perOp int, f func(i int)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPU()
	for i := 0; b.Loop(); i++ {
		f(i)
	}
	if cpu := threadCPU() - c0; cpu > 0 {
		b.ReportMetric(float64(b.N*perOp)/cpu.Seconds(), "pkts/cpu-s")
	}
}

func benchPacket(i int) []byte {
	p := make([]byte, 28)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], 28)
	p[9] = protoUDP
	copy(p[12:], []byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	copy(p[16:], []byte{10, 255, 0, 1})
	binary.BigEndian.PutUint16(p[20:], uint16(1024+i%60000))
	binary.BigEndian.PutUint16(p[22:], 53)
	return p
}

// benchEstablished looks up conns established connections spread over
// zones, in random order. The packet is rewritten in one buffer, as a
// receive loop hands packets over hot in cache; the table is not.
func benchEstablished(b *testing.B, conns, zones int) {
	tr := New(Config{})
	defer tr.Close()
	perZone := conns / zones
	for i := range conns {
		tr.Process(benchPacket(i%perZone), 0, Params{Zone: uint16(i / perZone), Commit: true}, 0)
	}
	order := make([]uint32, conns)
	for i, j := range rand.Perm(conns) {
		order[i] = uint32(j)
	}
	buf := benchPacket(0)
	b.ResetTimer()
	loopCPU(b, 1, func(i int) {
		j := int(order[i%conns])
		k := j % perZone
		buf[13], buf[14], buf[15] = byte(k>>16), byte(k>>8), byte(k)
		binary.BigEndian.PutUint16(buf[20:], uint16(1024+k%60000))
		tr.Process(buf, 0, Params{Zone: uint16(j / perZone)}, 1)
	})
}

func BenchmarkEstablishedHot(b *testing.B)  { benchEstablished(b, 1024, 4) }
func BenchmarkEstablished500k(b *testing.B) { benchEstablished(b, 500_000, 500) }
func BenchmarkEstablishedParallel(b *testing.B) {
	tr := New(Config{})
	defer tr.Close()
	pkts := make([][]byte, 4096)
	for i := range pkts {
		pkts[i] = benchPacket(i)
		tr.Process(pkts[i], 0, Params{Zone: 1, Commit: true}, 0)
	}
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			tr.Process(pkts[i%len(pkts)], 0, Params{Zone: 1}, 1)
		}
	})
}

func BenchmarkNewConnection(b *testing.B) {
	tr := New(Config{})
	defer tr.Close()
	pkts := make([][]byte, 1000)
	for i := range pkts {
		pkts[i] = benchPacket(i)
	}
	for i := 0; b.Loop(); i++ {
		tr.Process(pkts[i%1000], 0, Params{Zone: uint16(i / 1000), Commit: true}, 0)
	}
}

func BenchmarkFlushZone(b *testing.B) {
	tr := New(Config{})
	defer tr.Close()
	pkt := benchPacket(1)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		tr.Process(pkt, 0, Params{Zone: uint16(i), Commit: true}, 0)
		b.StartTimer()
		tr.Flush(uint16(i))
	}
}

// benchEstablishedBatch is benchEstablished through ProcessBatch: batches
// of MaxBatch packets of one zone (as one ct() action gets them), each
// batch in a random zone, random connections of it.
func benchEstablishedBatch(b *testing.B, conns, zones int) {
	tr := New(Config{})
	defer tr.Close()
	perZone := conns / zones
	for i := range conns {
		tr.Process(benchPacket(i%perZone), 0, Params{Zone: uint16(i / perZone), Commit: true}, 0)
	}
	nb := max(conns/MaxBatch, 1)
	batchZone := make([]uint16, nb)
	order := make([]uint32, nb*MaxBatch)
	for i := range nb {
		batchZone[i] = uint16(rand.IntN(zones))
		for j := range MaxBatch {
			order[i*MaxBatch+j] = uint32(rand.IntN(perZone))
		}
	}
	pkts := make([][]byte, MaxBatch)
	for i := range pkts {
		pkts[i] = benchPacket(0)
	}
	l3offs := make([]int, MaxBatch)
	results := make([]Result, MaxBatch)
	b.ResetTimer()
	loopCPU(b, MaxBatch, func(i int) {
		bi := i % nb
		for j, buf := range pkts {
			k := int(order[bi*MaxBatch+j])
			buf[13], buf[14], buf[15] = byte(k>>16), byte(k>>8), byte(k)
			binary.BigEndian.PutUint16(buf[20:], uint16(1024+k%60000))
		}
		tr.ProcessBatch(pkts, l3offs, Params{Zone: batchZone[bi]}, 1, results)
	})
	for _, r := range results {
		if r.State != StateTracked|StateNew {
			b.Fatalf("state %v, want +trk+new (committed, no reply yet)", r.State)
		}
	}
}

func BenchmarkEstablishedHotBatch(b *testing.B)  { benchEstablishedBatch(b, 1024, 4) }
func BenchmarkEstablished500kBatch(b *testing.B) { benchEstablishedBatch(b, 500_000, 500) }

// BenchmarkExpireNothingDue is the control loop's periodic Expire, every
// 100 ms, over 10,000 zones of 100 connections whose timeouts are far off.
// cpu-ns/pass is the calling thread's CPU time per Expire.
func BenchmarkExpireNothingDue(b *testing.B) {
	to := DefaultTimeouts()
	to.UDPFirst = 1000 * time.Hour
	tr := New(Config{Timeouts: &to})
	defer tr.Close()
	for z := range 10_000 {
		for i := range 100 {
			tr.Process(benchPacket(i), 0, Params{Zone: uint16(z), Commit: true}, 0)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	now := time.Duration(0)
	c0 := threadCPU()
	for b.Loop() {
		now += 100 * time.Millisecond
		if tr.Expire(now) != 0 {
			b.Fatal("something expired")
		}
	}
	b.ReportMetric(float64((threadCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/pass")
}
