package ovsdbbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// benchSchema is the small schema both servers serve.
const benchSchema = `{
  "name": "Bench",
  "version": "1.0.0",
  "tables": {
    "Item": {"columns": {"name": {"type": "string"}, "n": {"type": "integer"}}, "isRoot": true},
    "Fan": {"columns": {"seq": {"type": "integer"}}, "isRoot": true},
    "Big": {"columns": {
      "name": {"type": "string"},
      "n": {"type": "integer"},
      "external_ids": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}}
    }, "isRoot": true}
  }
}`

// Config sizes a run. Zero fields take the defaults of "govn bench ovsdb".
type Config struct {
	Duration     time.Duration // per insert-throughput measurement; 3s
	Clients      int           // concurrent inserting clients; 16
	Monitors     int           // monitoring clients for fan-out; 200
	Commits      int           // commits timed for fan-out; 50
	BigRows      int           // rows of the initial-monitor table; 100000
	MonitorRuns  int           // initial monitors timed (median); 3
	Logger       *slog.Logger  // progress; discarded if nil
	TempDir      string        // parent of the servers' directories; os.TempDir() if ""
	KeepTempDirs bool          // leave the servers' directories for inspection
	// Durable makes every insert transaction end with a durable commit,
	// so that both servers fsync before replying.
	Durable bool
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	if c.Monitors <= 0 {
		c.Monitors = 200
	}
	if c.Commits <= 0 {
		c.Commits = 50
	}
	if c.BigRows <= 0 {
		c.BigRows = 100000
	}
	if c.MonitorRuns <= 0 {
		c.MonitorRuns = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Result holds one server's figures.
type Result struct {
	Server             string  `json:"server"`
	InsertTPS1         float64 `json:"insert_txn_per_s_1_client"`
	InsertTPSN         float64 `json:"insert_txn_per_s_n_clients"`
	FanoutP50Ms        float64 `json:"fanout_p50_ms"`
	FanoutP99Ms        float64 `json:"fanout_p99_ms"`
	InitialMonitorMs   float64 `json:"initial_monitor_ms"`
	PeakRSSMiB         float64 `json:"peak_rss_mib"`
	RSSMiB             float64 `json:"rss_mib"`
	InsertTransactions int     `json:"insert_transactions"`
}

// Report is the outcome of a run: Results[0] is the subject, Results[1]
// the baseline it is compared with.
type Report struct {
	Clients  int       `json:"clients"`
	Monitors int       `json:"monitors"`
	Commits  int       `json:"commits"`
	BigRows  int       `json:"big_rows"`
	Durable  bool      `json:"durable_inserts"`
	Results  [2]Result `json:"-"`
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
	r := &Report{Clients: cfg.Clients, Monitors: cfg.Monitors, Commits: cfg.Commits, BigRows: cfg.BigRows, Durable: cfg.Durable}
	for i, s := range servers {
		r.Results[i].Server = s.target.Name
	}
	each := func(what string, f func(s *server, res *Result) error) error {
		for i, s := range servers {
			cfg.Logger.Info("measuring", "what", what, "server", s.target.Name)
			if err := f(s, &r.Results[i]); err != nil {
				return fmt.Errorf("%s, %s: %w", what, s.target.Name, err)
			}
		}
		return nil
	}
	steps := []struct {
		what string
		f    func(s *server, res *Result) error
	}{
		{"inserts from 1 client", func(s *server, res *Result) error {
			tps, n, err := insertThroughput(ctx, s, 1, cfg.Duration, cfg.Durable)
			res.InsertTPS1, res.InsertTransactions = tps, res.InsertTransactions+n
			return err
		}},
		{fmt.Sprintf("inserts from %d clients", cfg.Clients), func(s *server, res *Result) error {
			tps, n, err := insertThroughput(ctx, s, cfg.Clients, cfg.Duration, cfg.Durable)
			res.InsertTPSN, res.InsertTransactions = tps, res.InsertTransactions+n
			return err
		}},
		{"fan-out", func(s *server, res *Result) error {
			lat, err := fanout(ctx, s, cfg.Monitors, cfg.Commits)
			if err != nil {
				return err
			}
			res.FanoutP50Ms = ms(percentile(lat, 50))
			res.FanoutP99Ms = ms(percentile(lat, 99))
			return nil
		}},
		{"loading the big table", func(s *server, res *Result) error {
			return loadBig(ctx, s, cfg.BigRows)
		}},
		{"initial monitor", func(s *server, res *Result) error {
			d, err := initialMonitor(ctx, s, cfg.BigRows, cfg.MonitorRuns)
			res.InitialMonitorMs = ms(d)
			return err
		}},
		{"memory", func(s *server, res *Result) error {
			peak, cur, err := s.memory()
			res.PeakRSSMiB, res.RSSMiB = float64(peak)/(1<<20), float64(cur)/(1<<20)
			return err
		}},
	}
	for _, st := range steps {
		if err := each(st.what, st.f); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

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
// transaction, back to back, for d.
func insertThroughput(ctx context.Context, s *server, clients int, d time.Duration, durable bool) (perSecond float64, total int, err error) {
	commit := ""
	if durable {
		commit = `,{"op":"commit","durable":true}`
	}
	conns := make([]*jsonrpc.Conn, clients)
	for i := range conns {
		if conns[i], err = s.dial(ctx); err != nil {
			return 0, 0, err
		}
		defer conns[i].Close()
	}
	var count atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range conns {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				params := []byte(`["Bench",{"op":"insert","table":"Item","row":{"name":"c` + strconv.Itoa(i) + `-` + strconv.Itoa(n) + `","n":` + strconv.Itoa(n) + `}}` + commit + `]`)
				if _, err := transact(ctx, c, params); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				count.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	n := int(count.Load())
	return float64(n) / elapsed.Seconds(), n, nil
}

// round tracks one fan-out commit: how many monitors have its update.
type round struct {
	got  atomic.Int32
	want int32
	done chan struct{}
}

// fanout connects monitors clients monitoring table Fan, then times
// commits commits, each until every monitor has its update.
func fanout(ctx context.Context, s *server, monitors, commits int) ([]time.Duration, error) {
	writer, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer writer.Close()
	raw, err := transact(ctx, writer, json.RawMessage(`["Bench",{"op":"insert","table":"Fan","row":{"seq":0}}]`))
	if err != nil {
		return nil, err
	}
	var res []struct {
		UUID [2]string `json:"uuid"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res) != 1 {
		return nil, fmt.Errorf("insert reply %.200s: %v", raw, err)
	}
	row := res[0].UUID[1]

	var current atomic.Pointer[round]
	onUpdate := func(ctx context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
		if m.Method != "update" && m.Method != "update2" && m.Method != "update3" {
			return
		}
		if r := current.Load(); r != nil && r.got.Add(1) == r.want {
			close(r.done)
		}
	}
	conns := make([]*jsonrpc.Conn, 0, monitors)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	request := json.RawMessage(`["Bench","fan",{"Fan":[{"columns":["seq"]}]}]`)
	for range monitors {
		c, err := s.dialHandler(ctx, onUpdate)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		if err := c.Call(ctx, "monitor_cond", request, nil); err != nil {
			return nil, fmt.Errorf("monitor_cond: %w", err)
		}
	}
	lat := make([]time.Duration, 0, commits)
	for i := 1; i <= commits; i++ {
		r := &round{want: int32(monitors), done: make(chan struct{})}
		current.Store(r)
		params := json.RawMessage(`["Bench",{"op":"update","table":"Fan","where":[["_uuid","==",["uuid","` + row + `"]]],"row":{"seq":` + strconv.Itoa(i) + `}}]`)
		start := time.Now()
		if _, err := transact(ctx, writer, params); err != nil {
			return nil, err
		}
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("commit %d: only %d of %d monitors got the update within 30s", i, r.got.Load(), monitors)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		lat = append(lat, time.Since(start))
	}
	current.Store(nil)
	return lat, nil
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

// initialMonitor times monitor_cond of the whole Big table from a fresh
// connection, runs times, and returns the median.
func initialMonitor(ctx context.Context, s *server, rows, runs int) (time.Duration, error) {
	var times []time.Duration
	request := json.RawMessage(`["Bench","big",{"Big":[{"columns":["external_ids","n","name"]}]}]`)
	for range runs {
		c, err := s.dial(ctx)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		raw, err := c.CallRaw(ctx, "monitor_cond", request)
		d := time.Since(start)
		c.Close()
		if err != nil {
			return 0, fmt.Errorf("monitor_cond: %w", err)
		}
		if got := bytes.Count(raw, []byte(`"initial"`)); got != rows {
			return 0, fmt.Errorf("initial monitor sent %d rows, want %d", got, rows)
		}
		times = append(times, d)
	}
	return percentile(times, 50), nil
}
