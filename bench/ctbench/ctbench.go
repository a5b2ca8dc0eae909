// Package ctbench measures govn's connection tracker (datapath/conntrack)
// for "govn bench conntrack": zone flush latency with 10 million entries,
// flush of small and empty zones, the longest stall of a packet goroutine
// during a big flush, lookup and setup rates per core, and memory per entry;
// and, when the real OVS is installed and we run as root, the same zone
// flush on OVS's userspace datapath for a side-by-side ratio.
package ctbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"golang.org/x/sys/unix"
)

// Options size the benchmark; DefaultOptions are the figures.
type Options struct {
	BigZones, BigPerZone int // 10,000 x 1,000
	Flushes              int // flushes timed in the big table
	MedZones, MedPerZone int // 500 x 1,000
	PauseEntries         int // entries of the zone flushed under traffic
	PauseRuns            int
	RateDuration         time.Duration
	OVS                  bool          // also measure the real OVS
	OVSOnly              bool          // measure only the OVS side
	OVSFill              time.Duration // time allowed for creating OVS entries
	Log                  *slog.Logger  // progress; nil: none
}

// DefaultOptions are the sizes of issue 5.
func DefaultOptions() Options {
	return Options{
		BigZones: 10000, BigPerZone: 1000, Flushes: 100,
		MedZones: 500, MedPerZone: 1000,
		PauseEntries: 100000, PauseRuns: 9,
		RateDuration: time.Second,
		OVS:          true, OVSFill: 40 * time.Second,
	}
}

// Dist summarises durations in microseconds.
type Dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
}

func dist(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return Dist{N: len(s), P50: us(s[(len(s)-1)/2]), P99: us(s[(len(s)*99+99)/100-1]), Max: us(s[len(s)-1])}
}

// Report is everything "govn bench conntrack" prints.
type Report struct {
	GoMaxProcs int `json:"gomaxprocs"`

	BigEntries      int     `json:"big_entries"`
	BigZones        int     `json:"big_zones"`
	BuildMethod     string  `json:"build_method"`
	BuildSeconds    float64 `json:"build_seconds"`
	BytesPerEntry   float64 `json:"bytes_per_entry"`
	HeapGiB         float64 `json:"heap_gib"`
	BigFlush        Dist    `json:"big_flush"`         // until the zone is empty for lookups and Flush returned
	BigReclaim      Dist    `json:"big_reclaim"`       // background work per flushed zone
	BigReclaimAfter Dist    `json:"big_reclaim_after"` // wall time from Flush until reclaimed

	ExpirePass Dist `json:"expire_pass"` // Expire over all zones of the big table, nothing due

	MedEntries int  `json:"med_entries"`
	MedFlush   Dist `json:"med_flush_1000"`
	MedEmpty   Dist `json:"med_flush_empty"`

	PauseEntries int `json:"pause_zone_entries"`
	// Each run records the packet goroutine's worst stall while a zone is
	// flushed and reclaimed, and in an equal window without a flush (same
	// polling). Raw stalls include the time the OS ran other processes on
	// this shared machine; own stalls exclude the thread's run-queue wait.
	PauseRuns        []float64 `json:"pause_runs_us"`
	PauseOwnRuns     []float64 `json:"pause_own_runs_us"`
	PauseMaxUs       float64   `json:"pause_max_us"`
	PauseOwnMaxUs    float64   `json:"pause_own_max_us"`
	BaselineRuns     []float64 `json:"baseline_runs_us"`
	BaselineOwnRuns  []float64 `json:"baseline_own_runs_us"`
	BaselineMaxUs    float64   `json:"baseline_max_us"`
	BaselineOwnMaxUs float64   `json:"baseline_own_max_us"`
	PauseWindowUs    float64   `json:"pause_window_us"` // length of a flush+reclaim window
	PauseLookupsRun  int       `json:"pause_lookups_per_run"`

	LookupsPerSec       float64 `json:"lookups_per_sec"`     // wall clock, one goroutine
	LookupsPerCPUSec    float64 `json:"lookups_per_cpu_sec"` // per second of that thread's CPU time
	HotLookupsPerSec    float64 `json:"hot_lookups_per_sec"` // 1,000 connections, cache-resident
	HotLookupsPerCPUSec float64 `json:"hot_lookups_per_cpu_sec"`
	// The same two through ProcessBatch, BatchSize packets of one zone per
	// call (as one ct() action gets a batch), each batch in a random zone.
	BatchSize                int        `json:"batch_size"`
	BatchLookupsPerSec       float64    `json:"batch_lookups_per_sec"`
	BatchLookupsPerCPUSec    float64    `json:"batch_lookups_per_cpu_sec"`
	HotBatchLookupsPerSec    float64    `json:"hot_batch_lookups_per_sec"`
	HotBatchLookupsPerCPUSec float64    `json:"hot_batch_lookups_per_cpu_sec"`
	NewConnsPerSec           float64    `json:"new_conns_per_sec"`
	NewConnsPerCPUSec        float64    `json:"new_conns_per_cpu_sec"`
	OVS                      *OVSReport `json:"ovs,omitempty"`
	OVSSkipped               string     `json:"ovs_skipped,omitempty"`
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log.Info(fmt.Sprintf(format, args...))
	}
}

// udpPacket builds an IPv4 UDP packet of entry i (unique per zone).
func udpPacket(i int) []byte {
	p := make([]byte, 28)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], 28)
	p[8] = 64
	p[9] = 17
	copy(p[12:], []byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	copy(p[16:], []byte{10, 255, 0, 1})
	binary.BigEndian.PutUint16(p[20:], uint16(1024+i%60000))
	binary.BigEndian.PutUint16(p[22:], 53)
	binary.BigEndian.PutUint16(p[24:], 8)
	return p
}

// setReplyTuple makes buf (a reply of udpPacket) the reply of entry i.
func setReplyTuple(buf []byte, i int) {
	buf[16], buf[17], buf[18], buf[19] = 10, byte(i>>16), byte(i>>8), byte(i)
	binary.BigEndian.PutUint16(buf[22:], uint16(1024+i%60000))
}

func replyOf(p []byte) []byte {
	r := slices.Clone(p)
	copy(r[12:16], p[16:20])
	copy(r[16:20], p[12:16])
	copy(r[20:22], p[22:24])
	copy(r[22:24], p[20:22])
	return r
}

// fill commits perZone connections in each of zones [first, first+n), from
// several goroutines, through the packet path.
func fill(tr *conntrack.Tracker, pkts [][]byte, first, n, workers int) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for z := first + w; z < first+n; z += workers {
				p := conntrack.Params{Zone: uint16(z), Commit: true}
				for _, pkt := range pkts {
					tr.Process(pkt, 0, p, 0)
				}
			}
		}()
	}
	wg.Wait()
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitReclaimed waits until the tracker reclaimed want entries in total and
// returns the reclaimer's busy time.
func waitReclaimed(tr *conntrack.Tracker, want int64) time.Duration {
	for {
		s := tr.Stats()
		if s.Reclaimed >= want && s.PendingZones == 0 {
			return s.ReclaimTime
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// Run measures everything in opts.
func Run(ctx context.Context, opts Options) (*Report, error) {
	rep := &Report{GoMaxProcs: runtime.GOMAXPROCS(0)}
	if opts.OVSOnly {
		return rep, runOVSInto(ctx, &opts, rep)
	}
	if err := runBig(ctx, &opts, rep); err != nil {
		return rep, err
	}
	// Give the big table's memory back before timing rates, so the
	// runtime's freeing of 2.5 GiB does not run under them.
	runtime.GC()
	debug.FreeOSMemory()
	if err := runMedium(ctx, &opts, rep); err != nil {
		return rep, err
	}
	if err := runPause(ctx, &opts, rep); err != nil {
		return rep, err
	}
	if !opts.OVS {
		rep.OVSSkipped = "not requested"
		return rep, ctx.Err()
	}
	return rep, runOVSInto(ctx, &opts, rep)
}

func runOVSInto(ctx context.Context, opts *Options, rep *Report) error {
	o, skipped, err := runOVS(ctx, opts)
	if err != nil {
		rep.OVSSkipped = "failed: " + err.Error()
	} else {
		rep.OVS, rep.OVSSkipped = o, skipped
	}
	return ctx.Err()
}

func runBig(ctx context.Context, opts *Options, rep *Report) error {
	pkts := make([][]byte, opts.BigPerZone)
	for i := range pkts {
		pkts[i] = udpPacket(i)
	}
	before := heapAlloc()
	tr := conntrack.New(conntrack.Config{})
	defer tr.Close()
	opts.logf("building %d zones x %d entries through Process(commit)...", opts.BigZones, opts.BigPerZone)
	start := time.Now()
	fill(tr, pkts, 1, opts.BigZones, runtime.GOMAXPROCS(0))
	rep.BuildSeconds = time.Since(start).Seconds()
	rep.BuildMethod = "packet path: Process(commit) of prebuilt UDP packets"
	after := heapAlloc()
	st := tr.Stats()
	rep.BigEntries, rep.BigZones = int(st.Entries), st.Zones
	rep.BytesPerEntry = float64(after-before) / float64(st.Entries)
	rep.HeapGiB = float64(after) / (1 << 30)
	opts.logf("built %d entries in %.1fs, %.0f bytes/entry", st.Entries, rep.BuildSeconds, rep.BytesPerEntry)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Flushes are timed with the garbage collector left on, as in
	// production.
	var flushes, reclaims, reclaimAfter []time.Duration
	probe := pkts[0]
	for i := range opts.Flushes {
		zone := uint16(1 + i*(opts.BigZones/opts.Flushes))
		busy := tr.Stats().ReclaimTime
		reclaimed := tr.Stats().Reclaimed
		t0 := time.Now()
		tr.Flush(zone)
		d := time.Since(t0)
		if r := tr.Process(probe, 0, conntrack.Params{Zone: zone}, 1); r.State != conntrack.StateTracked|conntrack.StateNew {
			return fmt.Errorf("zone %d not empty after flush: %v", zone, r.State)
		}
		busy2 := waitReclaimed(tr, reclaimed+int64(opts.BigPerZone))
		reclaimAfter = append(reclaimAfter, time.Since(t0))
		flushes = append(flushes, d)
		reclaims = append(reclaims, busy2-busy)
	}
	rep.BigFlush, rep.BigReclaim, rep.BigReclaimAfter = dist(flushes), dist(reclaims), dist(reclaimAfter)
	// One timer-wheel pass over every zone, a second after the entries
	// were made (nothing due): the control loop's periodic cost.
	var expires []time.Duration
	for i := range 5 {
		t0 := time.Now()
		tr.Expire(time.Duration(i+1) * time.Second)
		expires = append(expires, time.Since(t0))
	}
	rep.ExpirePass = dist(expires)
	opts.logf("big flush p50 %.2fus p99 %.2fus", rep.BigFlush.P50, rep.BigFlush.P99)
	return nil
}

func runMedium(ctx context.Context, opts *Options, rep *Report) error {
	pkts := make([][]byte, opts.MedPerZone)
	for i := range pkts {
		pkts[i] = udpPacket(i)
	}
	tr := conntrack.New(conntrack.Config{})
	defer tr.Close()
	fill(tr, pkts, 1, opts.MedZones, runtime.GOMAXPROCS(0))
	rep.MedEntries = int(tr.Stats().Entries)
	// Established lookups in the reply direction, one goroutine on one
	// OS thread, connections in random order. The packet is written into
	// one buffer, as a receive loop would hand it over: hot in cache.
	total := opts.MedZones * opts.MedPerZone
	order := make([]uint32, total)
	for i, j := range rand.Perm(total) {
		order[i] = uint32(j)
	}
	buf := replyOf(udpPacket(0))
	n, wall, cpu := timed(opts.RateDuration, func(i int) {
		j := int(order[i%total])
		setReplyTuple(buf, j%opts.MedPerZone)
		tr.Process(buf, 0, conntrack.Params{Zone: uint16(1 + j/opts.MedPerZone)}, 2)
	})
	rep.LookupsPerSec, rep.LookupsPerCPUSec = float64(n)/wall.Seconds(), float64(n)/cpu.Seconds()
	// The same over a cache-resident working set: 1,000 connections of
	// one zone, random order.
	hot := rand.Perm(opts.MedPerZone)
	n, wall, cpu = timed(opts.RateDuration, func(i int) {
		setReplyTuple(buf, hot[i%len(hot)])
		tr.Process(buf, 0, conntrack.Params{Zone: uint16(opts.MedZones)}, 2)
	})
	rep.HotLookupsPerSec, rep.HotLookupsPerCPUSec = float64(n)/wall.Seconds(), float64(n)/cpu.Seconds()
	opts.logf("established lookups: %.2fM/s wall, %.2fM per CPU-second", rep.LookupsPerSec/1e6, rep.LookupsPerCPUSec/1e6)
	batchLookups(tr, opts, rep)

	var full, empty []time.Duration
	for z := 1; z <= min(100, opts.MedZones); z++ {
		reclaimed := tr.Stats().Reclaimed
		t0 := time.Now()
		tr.Flush(uint16(z))
		full = append(full, time.Since(t0))
		waitReclaimed(tr, reclaimed+int64(opts.MedPerZone))
	}
	for z := range 1000 {
		t0 := time.Now()
		tr.Flush(uint16(30000 + z))
		empty = append(empty, time.Since(t0))
	}
	rep.MedFlush, rep.MedEmpty = dist(full), dist(empty)

	// New connections: unique UDP tuples committed into fresh zones.
	newTr := conntrack.New(conntrack.Config{})
	defer newTr.Close()
	perZone := len(pkts)
	n, wall, cpu = timed(opts.RateDuration, func(i int) {
		newTr.Process(pkts[i%perZone], 0, conntrack.Params{Zone: uint16(1 + i/perZone), Commit: true}, 3)
	})
	rep.NewConnsPerSec, rep.NewConnsPerCPUSec = float64(n)/wall.Seconds(), float64(n)/cpu.Seconds()
	opts.logf("new connections: %.2fk/s wall, %.2fk per CPU-second", rep.NewConnsPerSec/1e3, rep.NewConnsPerCPUSec/1e3)
	return ctx.Err()
}

// batchLookups measures established lookups through ProcessBatch: the
// same reply packets as the single-packet figures, conntrack.MaxBatch per
// call, all of one zone. Over the medium table each batch takes a random
// zone and random connections of it; the hot figure uses the 1,000
// connections of one zone.
func batchLookups(tr *conntrack.Tracker, opts *Options, rep *Report) {
	const size = conntrack.MaxBatch
	rep.BatchSize = size
	bufs := make([][]byte, size)
	for i := range bufs {
		bufs[i] = replyOf(udpPacket(0))
	}
	l3offs := make([]int, size)
	results := make([]conntrack.Result, size)
	nb := max(opts.MedZones*opts.MedPerZone/size, 1)
	zones := make([]uint16, nb)
	conns := make([]uint32, nb*size)
	for b := range nb {
		zones[b] = uint16(1 + rand.IntN(opts.MedZones))
		for j := range size {
			conns[b*size+j] = uint32(rand.IntN(opts.MedPerZone))
		}
	}
	run := func(zoneOf func(b int) uint16) (float64, float64) {
		n, wall, cpu := timed(opts.RateDuration, func(i int) {
			b := i % nb
			for j, buf := range bufs {
				setReplyTuple(buf, int(conns[b*size+j]))
			}
			tr.ProcessBatch(bufs, l3offs, conntrack.Params{Zone: zoneOf(b)}, 2, results)
		})
		return float64(n*size) / wall.Seconds(), float64(n*size) / cpu.Seconds()
	}
	rep.BatchLookupsPerSec, rep.BatchLookupsPerCPUSec = run(func(b int) uint16 { return zones[b] })
	rep.HotBatchLookupsPerSec, rep.HotBatchLookupsPerCPUSec = run(func(int) uint16 { return uint16(opts.MedZones) })
	opts.logf("established lookups in batches of %d: %.2fM/s wall, %.2fM per CPU-second", size, rep.BatchLookupsPerSec/1e6, rep.BatchLookupsPerCPUSec/1e6)
}

// timed calls f(0), f(1), ... on one locked OS thread for about d (at most
// 65535*1000 calls) and returns the count, the wall time and the thread's CPU
// time.
func timed(d time.Duration, f func(int)) (int, time.Duration, time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	t0 := time.Now()
	n := 0
	for ; n < 65535*1000; n += 1024 {
		for i := n; i < n+1024; i++ {
			f(i)
		}
		if time.Since(t0) >= d {
			n += 1024
			break
		}
	}
	return n, time.Since(t0), threadCPU() - cpu0
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runPause(ctx context.Context, opts *Options, rep *Report) error {
	const bigZone, liveZone = 1, 2
	pkts := make([][]byte, opts.PauseEntries)
	for i := range pkts {
		pkts[i] = udpPacket(i)
	}
	live := pkts[:1000]
	liveReplies := make([][]byte, len(live))
	for i, p := range live {
		liveReplies[i] = replyOf(p)
	}
	rep.PauseEntries = opts.PauseEntries
	for run := range opts.PauseRuns {
		tr := conntrack.New(conntrack.Config{})
		fill(tr, pkts, bigZone, 1, 1)
		fill(tr, live, liveZone, 1, 1)
		runtime.GC()
		// measure runs a packet goroutine, alternating lookups in the
		// live zone and in the zone being flushed, while window runs.
		measure := func(window func()) (stall, time.Duration, int) {
			var (
				worst stall
				count int
				stop  = make(chan struct{})
				done  = make(chan struct{})
				ready = make(chan struct{})
			)
			go func() {
				defer close(done)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				m := newStallMeter()
				defer m.close()
				for i := 0; ; i++ {
					if i == 1000 {
						m.reset()
						close(ready)
					}
					if i&63 == 0 {
						select {
						case <-stop:
							count = i
							worst = m.worst
							return
						default:
						}
					}
					if i&1 == 0 {
						tr.Process(liveReplies[i%len(liveReplies)], 0, conntrack.Params{Zone: liveZone}, 1)
					} else {
						tr.Process(pkts[i%len(pkts)], 0, conntrack.Params{Zone: bigZone}, 1)
					}
					m.tick(i)
				}
			}()
			<-ready
			t0 := time.Now()
			window()
			w := time.Since(t0)
			close(stop)
			<-done
			return worst, w, count
		}
		flush, w, count := measure(func() {
			tr.Flush(bigZone)
			waitReclaimed(tr, int64(opts.PauseEntries))
		})
		// The same window with the same polling, without a flush.
		base, _, _ := measure(func() {
			for end := time.Now().Add(w); time.Now().Before(end); {
				tr.Stats()
				time.Sleep(20 * time.Microsecond)
			}
		})
		tr.Close()
		rep.PauseRuns = append(rep.PauseRuns, us(flush.raw))
		rep.PauseOwnRuns = append(rep.PauseOwnRuns, us(flush.own))
		rep.BaselineRuns = append(rep.BaselineRuns, us(base.raw))
		rep.BaselineOwnRuns = append(rep.BaselineOwnRuns, us(base.own))
		rep.PauseWindowUs = max(rep.PauseWindowUs, us(w))
		rep.PauseLookupsRun = count
		opts.logf("pause run %d: worst stall %v (%v excluding OS run-queue wait) during flush+reclaim of %v, %d packets; without flush %v (%v)",
			run, flush.raw, flush.own, w, count, base.raw, base.own)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	rep.PauseMaxUs = slices.Max(rep.PauseRuns)
	rep.PauseOwnMaxUs = slices.Max(rep.PauseOwnRuns)
	rep.BaselineMaxUs = slices.Max(rep.BaselineRuns)
	rep.BaselineOwnMaxUs = slices.Max(rep.BaselineOwnRuns)
	return nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// stall is the longest gap between two packets: raw wall time, and own:
// wall time less the time the OS kept the thread waiting on its run queue
// (from /proc/thread-self/schedstat), which on a shared machine is most of
// raw and none of govn's doing. Lock waits park the thread and stay in own.
type stall struct{ raw, own time.Duration }

type stallMeter struct {
	fd        int
	buf       [128]byte
	last      time.Time
	lastWait  int64
	windowMax time.Duration
	worst     stall
}

// The meter reads schedstat every schedEvery packets and charges the
// window's run-queue wait against the longest gap inside it.
const schedEvery = 16

func newStallMeter() *stallMeter {
	m := &stallMeter{fd: -1}
	if fd, err := unix.Open("/proc/thread-self/schedstat", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		m.fd = fd
	}
	m.reset()
	return m
}

func (m *stallMeter) close() {
	if m.fd >= 0 {
		unix.Close(m.fd)
	}
}

func (m *stallMeter) waitNanos() int64 {
	if m.fd < 0 {
		return 0
	}
	n, err := unix.Pread(m.fd, m.buf[:], 0)
	if err != nil || n <= 0 {
		return 0
	}
	f := strings.Fields(string(m.buf[:n]))
	if len(f) < 2 {
		return 0
	}
	w, _ := strconv.ParseInt(f[1], 10, 64)
	return w
}

func (m *stallMeter) reset() {
	m.worst = stall{}
	m.last = time.Now()
	m.lastWait = m.waitNanos()
	m.windowMax = 0
}

func (m *stallMeter) tick(i int) {
	now := time.Now()
	gap := now.Sub(m.last)
	m.last = now
	m.worst.raw = max(m.worst.raw, gap)
	m.windowMax = max(m.windowMax, gap)
	if i%schedEvery != 0 {
		return
	}
	wait := m.waitNanos()
	own := m.windowMax - time.Duration(wait-m.lastWait)
	m.worst.own = max(m.worst.own, own)
	m.lastWait = wait
	m.windowMax = 0
	m.last = time.Now() // the schedstat read is not the tracker's stall
}
