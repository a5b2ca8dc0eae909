package ovsdbbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// ClusterConfig sizes a cluster run. Zero fields take the defaults of
// "govn bench ovsdb --cluster".
type ClusterConfig struct {
	Inserts   int           // insert transactions from 1 client per round (4x from N); 2000
	Clients   int           // concurrent inserting clients; 16
	Rounds    int           // alternating rounds of the insert and fan-out measurements; 3
	Duration  time.Duration // cap on one insert measurement; 10s
	Monitors  int           // monitoring clients on the followers; 200
	Commits   int           // fan-out commits timed, spread over the rounds; 300
	Failovers int           // kills of each cluster's leader; 5
	Logger    *slog.Logger  // progress; discarded if nil
	TempDir   string        // parent of the clusters' directories; os.TempDir() if ""
	// KeepTempDirs leaves the clusters' directories for inspection.
	KeepTempDirs bool
}

func (c *ClusterConfig) defaults() {
	if c.Inserts == 0 {
		c.Inserts = 2000
	}
	if c.Clients == 0 {
		c.Clients = 16
	}
	if c.Rounds == 0 {
		c.Rounds = 3
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Monitors == 0 {
		c.Monitors = 200
	}
	if c.Commits == 0 {
		c.Commits = 300
	}
	if c.Failovers == 0 {
		c.Failovers = 5
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// ClusterResult is one cluster's figures. CPU figures are the time of
// all three members' threads together.
type ClusterResult struct {
	Server string `json:"server"`

	InsertTPS1   float64 `json:"insert_txn_per_s_1_client"`
	InsertP50Us1 float64 `json:"commit_p50_us_1_client"`
	InsertP99Us1 float64 `json:"commit_p99_us_1_client"`
	InsertCPUUs1 float64 `json:"cpu_us_per_txn_1_client"`
	InsertTPSN   float64 `json:"insert_txn_per_s_n_clients"`
	InsertP50UsN float64 `json:"commit_p50_us_n_clients"`
	InsertP99UsN float64 `json:"commit_p99_us_n_clients"`
	InsertCPUUsN float64 `json:"cpu_us_per_txn_n_clients"`

	FanoutP50Ms      float64 `json:"fanout_p50_ms"`
	FanoutP99Ms      float64 `json:"fanout_p99_ms"`
	FanoutFirstP50Ms float64 `json:"fanout_first_p50_ms"`
	FanoutCPUUs      float64 `json:"fanout_cpu_us_per_commit"`

	// FailoverMs lists, per kill -9 of the leader, the time until
	// another member accepted a write.
	FailoverMs       []float64 `json:"failover_ms"`
	FailoverMedianMs float64   `json:"failover_median_ms"`
	FailoverMaxMs    float64   `json:"failover_max_ms"`
	// Acked counts the transactions acknowledged to the client that
	// wrote through the failovers, Lost those of them some member did
	// not hold at the end (there must be none).
	Acked int `json:"acked_txns"`
	Lost  int `json:"lost_acked_txns"`
}

// ClusterReport is the outcome of a cluster run: Results[0] is the
// subject, Results[1] the baseline.
type ClusterReport struct {
	Clients   int `json:"clients"`
	Monitors  int `json:"monitors"`
	Commits   int `json:"commits"`
	Failovers int `json:"failovers"`
	// CPUs and the load average at the start and the end describe the
	// machine: figures from a busy machine vary more.
	CPUs           int     `json:"cpus"`
	LoadAverage    float64 `json:"load_average"`
	LoadAverageEnd float64 `json:"load_average_end"`
	// DiskSyncUs is the median time to append a 250-byte record to a
	// file and fdatasync it: a transaction on a majority's disk waits for
	// at least one, whatever the server.
	DiskSyncUs float64          `json:"disk_sync_us"`
	Results    [2]ClusterResult `json:"-"`
}

// RunCluster starts a 3-server cluster of each target side by side on
// loopback and measures them alternately: inserts to the leader from 1
// and from cfg.Clients clients (throughput, commit latency, CPU of all
// members per transaction), fan-out from the leader to monitors on the
// followers, and failover after kill -9 of the leader while a client
// writes through it (the time until another member accepts a write, and
// whether any acknowledged transaction was lost). It stops both
// clusters before returning.
func RunCluster(ctx context.Context, subject, baseline ClusterTarget, cfg ClusterConfig) (*ClusterReport, error) {
	cfg.defaults()
	parent := cfg.TempDir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "govn-cbench-")
	if err != nil {
		return nil, err
	}
	if cfg.KeepTempDirs {
		cfg.Logger.Info("keeping the clusters' directories", "dir", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	r := &ClusterReport{Clients: cfg.Clients, Monitors: cfg.Monitors, Commits: cfg.Commits, Failovers: cfg.Failovers,
		CPUs: runtime.NumCPU(), LoadAverage: loadAverage()}
	var clusters [2]*Cluster
	defer func() {
		for _, c := range clusters {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, t := range []ClusterTarget{subject, baseline} {
		cfg.Logger.Info("starting a cluster", "server", t.Name)
		c, err := StartCluster(ctx, t, dir, cfg.KeepTempDirs, []byte(benchSchema))
		if err != nil {
			return nil, fmt.Errorf("%s cluster: %w", t.Name, err)
		}
		clusters[i] = c
		r.Results[i].Server = t.Name
	}
	d, err := syncLatency(dir, 200, 250)
	if err != nil {
		return nil, fmt.Errorf("timing the disk: %w", err)
	}
	r.DiskSyncUs = float64(d) / float64(time.Microsecond)

	each := func(what string, rounds int, f func(c *Cluster, i int) error) error {
		for round := range rounds {
			for i, c := range clusters {
				cfg.Logger.Info("measuring", "what", what, "server", c.Target.Name, "round", round+1)
				if err := f(c, i); err != nil {
					return fmt.Errorf("%s, %s: %w", what, c.Target.Name, err)
				}
			}
		}
		return nil
	}
	const db = "Bench"
	for _, clients := range []int{1, cfg.Clients} {
		var tps [2][]float64
		var lat [2][]time.Duration
		var cpu [2]time.Duration
		var txns [2]int
		err := each(fmt.Sprintf("inserts from %d clients", clients), cfg.Rounds, func(c *Cluster, i int) error {
			n := cfg.Inserts
			if clients > 1 {
				n *= 4
			}
			// A round that fails (the leadership moved on a busy
			// machine: the old leader refuses writes) is run again
			// once, against the new leader.
			var err error
			for try := 0; try < 2; try++ {
				var l *Member
				if l, err = c.Leader(ctx, db, -1); err != nil {
					return err
				}
				var roundLat []time.Duration
				before := c.CPUTime()
				var rate float64
				var done int
				rate, done, err = runInsertsTimed(l.Sock, clients, n, cfg.Duration, false, &roundLat)
				if err != nil {
					cfg.Logger.Warn("insert round failed; running it again", "server", c.Target.Name, "err", err)
					continue
				}
				cpu[i] += c.CPUTime() - before
				txns[i] += done
				tps[i] = append(tps[i], rate)
				lat[i] = append(lat[i], roundLat...)
				return nil
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		for i := range clusters {
			res := &r.Results[i]
			p50, p99 := us(percentile(lat[i], 50)), us(percentile(lat[i], 99))
			perTxn := 0.0
			if txns[i] > 0 {
				perTxn = us(cpu[i]) / float64(txns[i])
			}
			if clients == 1 {
				res.InsertTPS1, res.InsertP50Us1, res.InsertP99Us1, res.InsertCPUUs1 = median(tps[i]), p50, p99, perTxn
			} else {
				res.InsertTPSN, res.InsertP50UsN, res.InsertP99UsN, res.InsertCPUUsN = median(tps[i]), p50, p99, perTxn
			}
		}
	}

	var rigs [2]*fanoutRig
	defer func() {
		for _, f := range rigs {
			if f != nil {
				f.close()
			}
		}
	}()
	err = each("connecting monitors to the followers", 1, func(c *Cluster, i int) error {
		l, err := c.Leader(ctx, db, -1)
		if err != nil {
			return err
		}
		var followers []string
		for _, m := range c.Members {
			if m != l {
				followers = append(followers, m.Sock)
			}
		}
		rigs[i], err = newFanout(ctx, l.Sock, followers, cfg.Monitors)
		return err
	})
	if err != nil {
		return nil, err
	}
	var fanLat [2][]time.Duration
	var fanCPU [2]time.Duration
	err = each("fan-out", cfg.Rounds, func(c *Cluster, i int) error {
		before := c.CPUTime()
		lat, err := rigs[i].commits(ctx, max(1, cfg.Commits/cfg.Rounds))
		fanCPU[i] += c.CPUTime() - before
		fanLat[i] = append(fanLat[i], lat...)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, f := range rigs {
		res := &r.Results[i]
		res.FanoutP50Ms, res.FanoutP99Ms = ms(percentile(fanLat[i], 50)), ms(percentile(fanLat[i], 99))
		res.FanoutFirstP50Ms = ms(percentile(f.firstLat, 50))
		if n := len(fanLat[i]); n > 0 {
			res.FanoutCPUUs = us(fanCPU[i]) / float64(n)
		}
		f.close()
		rigs[i] = nil
	}

	for i, c := range clusters {
		if err := failovers(ctx, c, db, cfg, i, &r.Results[i]); err != nil {
			return nil, fmt.Errorf("failover, %s: %w", c.Target.Name, err)
		}
	}
	r.LoadAverageEnd = loadAverage()
	return r, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// failovers kills the leader of c cfg.Failovers times while a client
// writes through every member, timing each failover, then checks that
// every member holds every acknowledged transaction.
func failovers(ctx context.Context, c *Cluster, db string, cfg ClusterConfig, k int, res *ClusterResult) error {
	w := &ackWriter{c: c, prefix: fmt.Sprintf("ack%d-", k)}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.run(wctx) }()
	defer func() { stop(); <-done }()
	if err := waitFor(ctx, "the first acknowledged writes", 20*time.Second, func() bool { return w.count() >= 20 }); err != nil {
		return err
	}
	var times []float64
	for round := range cfg.Failovers {
		cfg.Logger.Info("measuring", "what", "failover", "server", c.Target.Name, "round", round+1)
		l, err := c.Leader(ctx, db, -1)
		if err != nil {
			return err
		}
		killed := time.Now()
		l.Kill()
		took, err := firstWrite(ctx, c, l, killed, w, fmt.Sprintf("probe%d-%d-", k, round))
		if err != nil {
			return err
		}
		times = append(times, ms(took))
		if err := l.Start(ctx); err != nil {
			return err
		}
		before := w.count()
		err = waitFor(ctx, fmt.Sprintf("member %d to rejoin and the cluster to commit", l.Index), 30*time.Second, func() bool {
			st := l.Status(db)
			return (strings.Contains(st, "Role: follower") || strings.Contains(st, "Role: leader")) && w.count() >= before+10
		})
		if err != nil {
			return fmt.Errorf("%w\n%s", err, l.LogTail())
		}
	}
	stop()
	<-done
	res.FailoverMs = times
	res.FailoverMedianMs = median(times)
	res.FailoverMaxMs = slices.Max(times)
	acked := w.names()
	res.Acked = len(acked)
	res.Lost = c.missing(ctx, acked)
	return nil
}

// ackWriter commits Ack rows in a loop, round-robin over the members
// (a follower forwards to the leader), and records those acknowledged.
type ackWriter struct {
	c      *Cluster
	prefix string
	mu     sync.Mutex
	acked  []string
}

func (w *ackWriter) add(name string) {
	w.mu.Lock()
	w.acked = append(w.acked, name)
	w.mu.Unlock()
}

func (w *ackWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *ackWriter) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acked)
}

func (w *ackWriter) run(ctx context.Context) {
	conns := make([]*jsonrpc.Conn, len(w.c.Members))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	// A member that did not answer is left alone for a while, as a
	// client's inactivity probe would make it move on.
	skipUntil := make([]time.Time, len(conns))
	for i := 0; ctx.Err() == nil; i++ {
		k := i % len(conns)
		if time.Now().Before(skipUntil[k]) {
			time.Sleep(time.Millisecond)
			continue
		}
		if conns[k] == nil || conns[k].Err() != nil {
			if conns[k] != nil {
				conns[k].Close()
			}
			c, err := dialQuiet(ctx, w.c.Members[k].Sock)
			if err != nil {
				conns[k] = nil
				skipUntil[k] = time.Now().Add(100 * time.Millisecond)
				continue
			}
			conns[k] = c
		}
		name := w.prefix + strconv.Itoa(i)
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := transact(tctx, conns[k], insertAck(name))
		cancel()
		if err == nil {
			w.add(name)
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if tctx.Err() != nil {
			conns[k].Close() // a stopped member: try it afresh later
			conns[k] = nil
			skipUntil[k] = time.Now().Add(time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dialQuiet is dialSock for the failover's clients, whose calls time
// out and whose connections break by design: a late reply to a call
// given up on is not worth a log line.
func dialQuiet(ctx context.Context, sock string) (*jsonrpc.Conn, error) {
	nc, err := jsonrpc.Dial(ctx, "unix:"+sock)
	if err != nil {
		return nil, err
	}
	return jsonrpc.NewConn(ctx, nc, jsonrpc.Options{Handler: echoing(nil), Logger: slog.New(slog.DiscardHandler)}), nil
}

func insertAck(name string) json.RawMessage {
	return json.RawMessage(`["Bench",{"op":"insert","table":"Ack","row":{"name":"` + name + `"}}]`)
}

// firstWrite returns the time from since until a member other than
// killed acknowledged a write, trying every one of them at once and
// again until one does (a write sent before the election that
// completes after it counts when it completes). Acknowledged probes
// are recorded in w.
func firstWrite(ctx context.Context, c *Cluster, killed *Member, since time.Time, w *ackWriter, prefix string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	first := make(chan time.Duration, 1)
	var wg sync.WaitGroup
	for _, m := range c.Members {
		if m == killed {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				conn, err := dialQuiet(ctx, m.Sock)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
				name := prefix + strconv.Itoa(m.Index) + "-" + strconv.Itoa(i)
				_, err = transact(tctx, conn, insertAck(name))
				tcancel()
				conn.Close()
				if err == nil {
					w.add(name)
					select {
					case first <- time.Since(since):
					default:
					}
					cancel()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	select {
	case d := <-first:
		return d, nil
	default:
		return 0, fmt.Errorf("no member accepted a write within 30s of the leader's kill")
	}
}

// missing waits up to 30 s for every member to hold every name of acked
// in table Ack and returns how many some member still lacks.
func (c *Cluster) missing(ctx context.Context, acked []string) int {
	lost := len(acked)
	deadline := time.Now().Add(30 * time.Second)
	for {
		lost = 0
		missingAny := map[string]bool{}
		for _, m := range c.Members {
			held, err := ackNames(ctx, m.Sock)
			if err != nil {
				lost = len(acked)
				break
			}
			for _, a := range acked {
				if !held[a] {
					missingAny[a] = true
				}
			}
		}
		if lost == 0 {
			lost = len(missingAny)
		}
		if lost == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return lost
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ackNames returns the names in table Ack of the member at sock (its own
// copy: a follower answers reads itself).
func ackNames(ctx context.Context, sock string) (map[string]bool, error) {
	conn, err := dialSock(ctx, sock, nil)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := transact(tctx, conn, json.RawMessage(`["Bench",{"op":"select","table":"Ack","where":[],"columns":["name"]}]`))
	if err != nil {
		return nil, err
	}
	var out []struct {
		Rows []struct {
			Name string `json:"name"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return nil, fmt.Errorf("select: %.200s: %v", raw, err)
	}
	held := make(map[string]bool, len(out[0].Rows))
	for _, r := range out[0].Rows {
		held[r.Name] = true
	}
	return held, nil
}
