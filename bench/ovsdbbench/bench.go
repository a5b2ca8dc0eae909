package ovsdbbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// benchSchema is the small schema both servers serve.
const benchSchema = `{
  "name": "Bench",
  "version": "1.0.0",
  "tables": {
    "Item": {"columns": {"name": {"type": "string"}, "n": {"type": "integer"}}, "isRoot": true},
    "Fan": {"columns": {"seq": {"type": "integer"}}, "isRoot": true},
    "Ack": {"columns": {"name": {"type": "string"}}, "isRoot": true},
    "Big": {"columns": {
      "name": {"type": "string"},
      "n": {"type": "integer"},
      "external_ids": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
    }, "isRoot": true}
  }
}`

// Config sizes a run. Zero fields take the defaults of "govn bench ovsdb".
type Config struct {
	Inserts      int           // insert transactions per throughput measurement from 1 client (4x from N); 4000
	Duration     time.Duration // cap on one throughput measurement; 10s
	Rounds       int           // alternating rounds of each measurement (median taken); 3
	Clients      int           // concurrent inserting clients; 16
	Monitors     int           // monitoring clients for fan-out; 200
	Commits      int           // commits timed for fan-out; 300
	BigRows      int           // rows of the initial-monitor table; 100000
	MonitorRuns  int           // initial monitors timed per round; 1
	Logger       *slog.Logger  // progress; discarded if nil
	TempDir      string        // parent of the servers' directories; os.TempDir() if ""
	KeepTempDirs bool          // leave the servers' directories for inspection
	// InsertModes lists the ways inserts are measured: ModeDefault (plain
	// transactions) and ModeDurable (each ends with a durable commit, so
	// that both servers fsync before replying). Empty means both.
	InsertModes []string
	// Measure lists what to measure: MeasureInserts, MeasureFanout and
	// MeasureInitial. Empty means all three.
	Measure []string
}

// What Config.Measure can name.
const (
	MeasureInserts = "inserts"
	MeasureFanout  = "fanout"
	MeasureInitial = "initial"
)

func (c *Config) measures(what string) bool {
	return len(c.Measure) == 0 || slices.Contains(c.Measure, what)
}

// Insert modes (see Config.InsertModes).
const (
	ModeDefault = "default"
	ModeDurable = "durable"
)

func (c *Config) defaults() {
	if c.Inserts <= 0 {
		c.Inserts = 4000
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	if c.Monitors <= 0 {
		c.Monitors = 200
	}
	if c.Commits <= 0 {
		c.Commits = 300
	}
	if c.BigRows <= 0 {
		c.BigRows = 100000
	}
	if c.MonitorRuns <= 0 {
		c.MonitorRuns = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.InsertModes) == 0 {
		c.InsertModes = []string{ModeDefault, ModeDurable}
	}
}

// Result holds one server's figures.
type Result struct {
	Server      string  `json:"server"`
	InsertTPS1  float64 `json:"insert_txn_per_s_1_client"`
	InsertTPSN  float64 `json:"insert_txn_per_s_n_clients"`
	DurableTPS1 float64 `json:"durable_insert_txn_per_s_1_client"`
	DurableTPSN float64 `json:"durable_insert_txn_per_s_n_clients"`
	FanoutP50Ms float64 `json:"fanout_p50_ms"`
	FanoutP99Ms float64 `json:"fanout_p99_ms"`
	// FanoutFirstP50Ms is the median time until the first monitor has a
	// commit's update: the server's work before it starts sending.
	FanoutFirstP50Ms float64 `json:"fanout_first_p50_ms"`
	// FanoutCPUUs is the server's CPU time per fan-out commit (all its
	// threads), and InsertCPUUs per insert transaction from N clients in
	// the first insert mode measured: the server's own cost, which
	// load from elsewhere on the machine disturbs less than latency.
	FanoutCPUUs        float64 `json:"fanout_cpu_us_per_commit"`
	InsertCPUUs        float64 `json:"insert_cpu_us_per_txn_n_clients"`
	InitialMonitorMs   float64 `json:"initial_monitor_ms"`
	PeakRSSMiB         float64 `json:"peak_rss_mib"`
	RSSMiB             float64 `json:"rss_mib"`
	InsertTransactions int     `json:"insert_transactions"`
}

// Report is the outcome of a run: Results[0] is the subject, Results[1]
// the baseline it is compared with.
type Report struct {
	Clients  int `json:"clients"`
	Monitors int `json:"monitors"`
	Commits  int `json:"commits"`
	BigRows  int `json:"big_rows"`
	// InsertModes are the insert modes measured (Config.InsertModes).
	InsertModes []string `json:"insert_modes"`
	// CPUs and LoadAverage describe the machine when the run started:
	// figures from a busy machine vary more.
	CPUs        int     `json:"cpus"`
	LoadAverage float64 `json:"load_average"`
	// DiskSyncUs is the median time to append a 250-byte record to a file
	// in the servers' directory and fdatasync it (measured with inserts):
	// no transaction acknowledged after its fsync can take less, so one
	// client waiting for each reply makes at most 1e6/DiskSyncUs per
	// second, on any server.
	DiskSyncUs float64   `json:"disk_sync_us,omitempty"`
	Results    [2]Result `json:"-"`
}

// Run starts both targets and measures them alternately. It stops both
// servers before returning.
func Run(ctx context.Context, subject, baseline Target, cfg Config) (*Report, error) {
	cfg.defaults()
	parent := cfg.TempDir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "govn-bench-")
	if err != nil {
		return nil, err
	}
	if cfg.KeepTempDirs {
		cfg.Logger.Info("keeping the servers' directories", "dir", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	schema := filepath.Join(dir, "bench.ovsschema")
	if err := os.WriteFile(schema, []byte(benchSchema), 0o644); err != nil {
		return nil, err
	}
	var servers [2]*server
	for i, t := range []Target{subject, baseline} {
		s, err := startServer(ctx, t, dir, schema)
		if err != nil {
			for _, s := range servers[:i] {
				s.stop()
			}
			return nil, err
		}
		defer s.stop()
		servers[i] = s
	}
	r := &Report{Clients: cfg.Clients, Monitors: cfg.Monitors, Commits: cfg.Commits, BigRows: cfg.BigRows,
		CPUs: runtime.NumCPU(), LoadAverage: loadAverage()}
	for i, s := range servers {
		r.Results[i].Server = s.target.Name
	}
	// each runs f on both servers, one after the other, rounds times, so
	// that load from elsewhere on the machine hits both alike.
	each := func(what string, rounds int, f func(s *server, i int) error) error {
		for round := range rounds {
			for i, s := range servers {
				cfg.Logger.Info("measuring", "what", what, "server", s.target.Name, "round", round+1)
				if err := f(s, i); err != nil {
					return fmt.Errorf("%s, %s: %w", what, s.target.Name, err)
				}
			}
		}
		return nil
	}
	var monitorTimes [2][]float64
	tps := map[string]*[2][]float64{} // by mode and client count
	var fanoutLat [2][]time.Duration
	var fanoutCPU [2]time.Duration
	var firstLat [2][]time.Duration
	var insertCPU [2]time.Duration
	var insertCPUTxns [2]int
	insert := func(clients int, mode string) func(s *server, i int) error {
		into := &[2][]float64{}
		tps[mode+strconv.Itoa(clients)] = into
		return func(s *server, i int) error {
			before, err := s.cpuTime()
			if err != nil {
				return err
			}
			txns := cfg.Inserts
			if clients > 1 {
				// Many clients are several times faster: a
				// measurement that lasts as long varies less.
				txns *= 4
			}
			tps, n, err := insertThroughput(ctx, s, clients, txns, cfg.Duration, mode == ModeDurable)
			into[i] = append(into[i], tps)
			r.Results[i].InsertTransactions += n
			if after, cerr := s.cpuTime(); cerr == nil && clients > 1 && mode == cfg.InsertModes[0] {
				insertCPU[i] += after - before
				insertCPUTxns[i] += n
			}
			return err
		}
	}
	if cfg.measures(MeasureInserts) {
		r.InsertModes = cfg.InsertModes
		d, err := syncLatency(dir, 200, 250)
		if err != nil {
			return nil, fmt.Errorf("timing the disk: %w", err)
		}
		r.DiskSyncUs = float64(d) / float64(time.Microsecond)
	}
	for _, what := range cfg.Measure {
		if what != MeasureInserts && what != MeasureFanout && what != MeasureInitial {
			return nil, fmt.Errorf("unknown measurement %q", what)
		}
	}
	for _, mode := range cfg.InsertModes {
		if mode != ModeDefault && mode != ModeDurable {
			return nil, fmt.Errorf("unknown insert mode %q", mode)
		}
		if !cfg.measures(MeasureInserts) {
			continue
		}
		if err := each(mode+" inserts from 1 client", cfg.Rounds, insert(1, mode)); err != nil {
			return nil, err
		}
		if err := each(fmt.Sprintf("%s inserts from %d clients", mode, cfg.Clients), cfg.Rounds, insert(cfg.Clients, mode)); err != nil {
			return nil, err
		}
	}
	medianOf := func(mode string, clients, i int) float64 {
		if t := tps[mode+strconv.Itoa(clients)]; t != nil {
			return median(t[i])
		}
		return 0
	}
	var rigs [2]*fanoutRig
	defer func() {
		for _, f := range rigs {
			if f != nil {
				f.close()
			}
		}
	}()
	if cfg.measures(MeasureFanout) {
		err = each("connecting monitors", 1, func(s *server, i int) (err error) {
			rigs[i], err = newFanout(ctx, s.sock, []string{s.sock}, cfg.Monitors)
			return err
		})
		if err != nil {
			return nil, err
		}
		perRound := max(1, cfg.Commits/cfg.Rounds)
		err = each("fan-out", cfg.Rounds, func(s *server, i int) error {
			before, err := s.cpuTime()
			if err != nil {
				return err
			}
			lat, err := rigs[i].commits(ctx, perRound)
			fanoutLat[i] = append(fanoutLat[i], lat...)
			after, cerr := s.cpuTime()
			fanoutCPU[i] += after - before
			if err == nil {
				err = cerr
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		for i, f := range rigs {
			firstLat[i] = f.firstLat
			f.close()
			rigs[i] = nil
		}
	}
	if cfg.measures(MeasureInitial) {
		if err := each("loading the big table", 1, func(s *server, i int) error { return loadBig(ctx, s, cfg.BigRows) }); err != nil {
			return nil, err
		}
		err = each("initial monitor", cfg.Rounds*cfg.MonitorRuns, func(s *server, i int) error {
			d, err := initialMonitor(ctx, s, cfg.BigRows)
			monitorTimes[i] = append(monitorTimes[i], ms(d))
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	for i, s := range servers {
		res := &r.Results[i]
		res.InsertTPS1, res.InsertTPSN = medianOf(ModeDefault, 1, i), medianOf(ModeDefault, cfg.Clients, i)
		res.DurableTPS1, res.DurableTPSN = medianOf(ModeDurable, 1, i), medianOf(ModeDurable, cfg.Clients, i)
		res.FanoutP50Ms = ms(percentile(fanoutLat[i], 50))
		res.FanoutP99Ms = ms(percentile(fanoutLat[i], 99))
		res.FanoutFirstP50Ms = ms(percentile(firstLat[i], 50))
		if n := len(fanoutLat[i]); n > 0 {
			res.FanoutCPUUs = float64(fanoutCPU[i]) / float64(time.Microsecond) / float64(n)
		}
		if n := insertCPUTxns[i]; n > 0 {
			res.InsertCPUUs = float64(insertCPU[i]) / float64(time.Microsecond) / float64(n)
		}
		res.InitialMonitorMs = median(monitorTimes[i])
		peak, cur, err := s.memory()
		if err != nil {
			return nil, fmt.Errorf("memory of %s: %w", s.target.Name, err)
		}
		res.PeakRSSMiB, res.RSSMiB = float64(peak)/(1<<20), float64(cur)/(1<<20)
	}
	return r, nil
}

// loadAverage returns the 1-minute load average (0 if unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of xs (the lower middle one for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(rank, 1)-1]
}

// transact sends one transaction and fails on any operation error.
func transact(ctx context.Context, c *jsonrpc.Conn, params json.RawMessage) (json.RawMessage, error) {
	raw, err := c.CallRaw(ctx, "transact", params)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(raw, []byte(`"error"`)) {
		return nil, fmt.Errorf("transaction failed: %.300s", raw)
	}
	return raw, nil
}

// insertThroughput runs clients connections that each insert one row per
// transaction, back to back, until they have made txns transactions
// together (so that both servers end up holding the same rows) or d has
// passed (see insertLoad).
func insertThroughput(ctx context.Context, s *server, clients, txns int, d time.Duration, durable bool) (perSecond float64, total int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	return runInserts(s.sock, clients, txns, d, durable)
}

// round tracks one fan-out commit: how many monitors have its update.
type round struct {
	got   int32 // touched only by the fan-out reader's goroutine
	want  int32
	at    time.Time // when the last monitor's update arrived
	first time.Time // when the first did
	done  chan struct{}
}

// fanoutRig is a writer and monitors clients monitoring table Fan's one
// row, which the writer updates. The monitors are read by one fanReader.
type fanoutRig struct {
	writer   *jsonrpc.Conn
	reader   *fanReader
	monitors int
	row      string
	seq      int
	current  atomic.Pointer[round]
	// firstLat collects, per commit, the time until the first monitor had
	// the update.
	firstLat []time.Duration
}

// newFanout connects the writer to writerSock and the monitors to
// monitorSocks, in turn. Before the monitors connect it waits until every
// one of monitorSocks serves the row the writer inserted (a cluster's
// followers apply it a little after the leader replied).
func newFanout(ctx context.Context, writerSock string, monitorSocks []string, monitors int) (*fanoutRig, error) {
	f := &fanoutRig{monitors: monitors}
	var err error
	if f.writer, err = dialSock(ctx, writerSock, nil); err != nil {
		return nil, err
	}
	raw, err := transact(ctx, f.writer, json.RawMessage(`["Bench",{"op":"insert","table":"Fan","row":{"seq":0}}]`))
	if err != nil {
		f.close()
		return nil, err
	}
	var res []struct {
		UUID [2]string `json:"uuid"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res) != 1 {
		f.close()
		return nil, fmt.Errorf("insert reply %.200s: %v", raw, err)
	}
	f.row = res[0].UUID[1]
	for _, sock := range monitorSocks {
		if sock == writerSock {
			continue
		}
		if err := waitRow(ctx, sock, "Fan", f.row); err != nil {
			f.close()
			return nil, err
		}
	}
	request := []byte(`["Bench","fan",{"Fan":[{"columns":["seq"]}]}]`)
	conns := make([]*monConn, 0, monitors)
	for i := range monitors {
		c, err := dialMonitor(monitorSocks[i%len(monitorSocks)], request)
		if err != nil {
			for _, c := range conns {
				unix.Close(c.fd)
			}
			f.close()
			return nil, err
		}
		conns = append(conns, c)
	}
	f.reader, err = newFanReader(conns, func(at time.Time) {
		if r := f.current.Load(); r != nil {
			r.got++
			if r.got == 1 {
				r.first = at
			}
			if r.got == r.want {
				r.at = at
				close(r.done)
			}
		}
	})
	if err != nil {
		for _, c := range conns {
			unix.Close(c.fd)
		}
		f.close()
		return nil, err
	}
	return f, nil
}

// commits times n commits, each from sending it until every monitor has
// its update (its socket readable with it, as the fan-out reader saw).
// The writer's reply is waited for after the timing, not in it: a server
// may notify monitors before its commit is durable and reply to the
// writer only after, and the figure is the monitors' latency.
func (f *fanoutRig) commits(ctx context.Context, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	defer f.current.Store(nil)
	for range n {
		f.seq++
		r := &round{want: int32(f.monitors), done: make(chan struct{})}
		f.current.Store(r)
		params := json.RawMessage(`["Bench",{"op":"update","table":"Fan","where":[["_uuid","==",["uuid","` + f.row + `"]]],"row":{"seq":` + strconv.Itoa(f.seq) + `}}]`)
		replied := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := transact(ctx, f.writer, params)
			replied <- err
		}()
		timeout := time.NewTimer(30 * time.Second)
		select {
		case <-r.done:
		case <-timeout.C:
			err := f.reader.Err()
			if err == nil {
				err = errors.New("no reader error")
			}
			return nil, fmt.Errorf("commit %d: not every one of %d monitors got the update within 30s: %w", f.seq, f.monitors, err)
		case <-ctx.Done():
			timeout.Stop()
			return nil, ctx.Err()
		}
		timeout.Stop()
		lat = append(lat, r.at.Sub(start))
		f.firstLat = append(f.firstLat, r.first.Sub(start))
		if err := <-replied; err != nil {
			return nil, err
		}
	}
	return lat, nil
}

func (f *fanoutRig) close() {
	if f.writer != nil {
		f.writer.Close()
	}
	if f.reader != nil {
		f.reader.close()
	}
}

// loadBig fills table Big with rows rows, a few thousand per transaction.
func loadBig(ctx context.Context, s *server, rows int) error {
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	const batch = 2000
	for start := 0; start < rows; start += batch {
		b := []byte(`["Bench"`)
		for i := start; i < min(start+batch, rows); i++ {
			b = append(b, `,{"op":"insert","table":"Big","row":{"name":"big-row-`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `","n":`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `,"external_ids":["map",[["owner","bench"],["index","`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `"]]]}}`...)
		}
		b = append(b, ']')
		if _, err := transact(ctx, c, b); err != nil {
			return fmt.Errorf("loading rows %d..: %w", start, err)
		}
	}
	return nil
}

// waitRow waits until the server at sock serves row uuid of table.
func waitRow(ctx context.Context, sock, table, uuid string) error {
	c, err := dialSock(ctx, sock, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	q := json.RawMessage(`["Bench",{"op":"select","table":"` + table + `","where":[["_uuid","==",["uuid","` + uuid + `"]]],"columns":["_uuid"]}]`)
	deadline := time.Now().Add(15 * time.Second)
	for {
		raw, err := transact(ctx, c, q)
		if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte(uuid)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve %s row %s within 15s", sock, table, uuid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// initialMonitor times monitor_cond of the whole Big table from a fresh
// connection, until the whole reply has arrived.
func initialMonitor(ctx context.Context, s *server, rows int) (time.Duration, error) {
	request := json.RawMessage(`["Bench","big",{"Big":[{"columns":["external_ids","n","name"]}]}]`)
	c, err := s.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	raw, err := c.CallRaw(ctx, "monitor_cond", request)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("monitor_cond: %w", err)
	}
	if got := bytes.Count(raw, []byte(`"initial"`)); got != rows {
		return 0, fmt.Errorf("initial monitor sent %d rows, want %d", got, rows)
	}
	return d, nil
}
