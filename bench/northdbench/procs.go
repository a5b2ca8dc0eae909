package northdbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/govn/govn/bench/procstat"
	"github.com/govn/govn/ovsdb/jsonrpc"
	"github.com/govn/govn/unixctl"
)

// Binaries are the programs the bench runs.
type Binaries struct {
	Govn                                        string // the govn binary (govn db, govn northd)
	OvsdbServer, OvsdbTool, OvnNorthd, OvnNbctl string
	NBSchema, SBSchema                          string // the OVN schema files
}

// FindBinaries looks the real OVN/OVS programs up in PATH; govn is the
// path of the govn binary.
func FindBinaries(govn string) (Binaries, error) {
	b := Binaries{Govn: govn, NBSchema: "/usr/share/ovn/ovn-nb.ovsschema", SBSchema: "/usr/share/ovn/ovn-sb.ovsschema"}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"ovsdb-server", &b.OvsdbServer}, {"ovsdb-tool", &b.OvsdbTool}, {"ovn-northd", &b.OvnNorthd}, {"ovn-nbctl", &b.OvnNbctl}} {
		path, err := exec.LookPath(p.name)
		if err != nil {
			return b, fmt.Errorf("the real %s is needed: %w", p.name, err)
		}
		*p.dst = path
	}
	for _, f := range []string{b.NBSchema, b.SBSchema} {
		if _, err := os.Stat(f); err != nil {
			return b, fmt.Errorf("the OVN schema is needed: %w", err)
		}
	}
	return b, nil
}

// proc is a daemon the bench started, in the foreground.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	log    string
}

func startProc(name, dir string, args []string, env []string) (*proc, error) {
	p := &proc{name: name, exited: make(chan struct{}), log: filepath.Join(dir, name+".stderr")}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { p.err = p.cmd.Wait(); out.Close(); close(p.exited) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// tail is the end of the process's output, for errors.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return strings.TrimSpace(string(b))
}

// stop asks the process to end (SIGTERM) and kills it after a while.
func (p *proc) stop() {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// usage is a process's resource use so far, from /proc.
type usage struct {
	peakRSS int64         // VmHWM
	rss     int64         // VmRSS
	cpu     time.Duration // user and system time of all threads
}

func procUsage(pid int) (usage, error) {
	var u usage
	peak, rss, err := procstat.Memory(pid)
	if err != nil {
		return u, err
	}
	u.peakRSS, u.rss = peak, rss
	u.cpu, err = procstat.CPUTime(pid)
	return u, err
}

// dbServer is an OVSDB server on one database.
type dbServer struct {
	*proc
	kind string // "govn" or "ovsdb-server"
	file string
	sock string
	ctl  string
}

const (
	govnDB      = "govn db"
	ovsdbServer = "ovsdb-server"
)

// startDB creates a database from schema in dir and serves it with kind.
func startDB(ctx context.Context, b Binaries, kind, dir, name, schema string) (*dbServer, error) {
	s := &dbServer{kind: kind, file: filepath.Join(dir, name+".db"), sock: filepath.Join(dir, name+".sock"),
		ctl: filepath.Join(dir, name+".ctl")}
	if len(s.sock) > 100 {
		return nil, fmt.Errorf("socket path %s is too long for a unix socket", s.sock)
	}
	var create, serve []string
	switch kind {
	case govnDB:
		create = []string{b.Govn, "db", "create", s.file, schema}
		serve = []string{b.Govn, "db", "--remote=punix:" + s.sock, "--unixctl=" + s.ctl, s.file}
	case ovsdbServer:
		create = []string{b.OvsdbTool, "create", s.file, schema}
		serve = []string{b.OvsdbServer, "--no-chdir", "--remote=punix:" + s.sock, "--unixctl=" + s.ctl,
			"--log-file=" + filepath.Join(dir, name+".log"), s.file}
	}
	if out, err := exec.CommandContext(ctx, create[0], create[1:]...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: creating %s: %w: %s", kind, name, err, out)
	}
	var err error
	if s.proc, err = startProc(name+"-"+strings.ReplaceAll(kind, " ", "-"), dir, serve, nil); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := s.dial(ctx)
		if err == nil {
			err = c.Call(ctx, "list_dbs", nil, nil)
			c.Close()
			if err == nil {
				return s, nil
			}
		}
		if !s.alive() || time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s on %s did not start: %v: %s", kind, name, err, s.tail())
		}
		select {
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *dbServer) dial(ctx context.Context) (*jsonrpc.Conn, error) {
	nc, err := jsonrpc.Dial(ctx, "unix:"+s.sock)
	if err != nil {
		return nil, err
	}
	return jsonrpc.NewConn(ctx, nc, jsonrpc.Options{MaxMessageSize: 1 << 30, Handler: func(ctx context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
		if m.Method == "echo" && m.Kind() == jsonrpc.KindRequest {
			_ = c.Reply(m.ID, m.Params)
		}
	}}), nil
}

// db is a client connection to one database.
type db struct {
	name string
	conn *jsonrpc.Conn
}

func (s *dbServer) open(ctx context.Context, name string) (*db, error) {
	c, err := s.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", s.sock, err)
	}
	return &db{name: name, conn: c}, nil
}

func (d *db) close() { d.conn.Close() }

// transact runs ops and returns each one's result; any error fails it.
func (d *db) transact(ctx context.Context, ops Ops) ([]json.RawMessage, error) {
	params := []any{d.name}
	for _, op := range ops {
		params = append(params, op)
	}
	var res []json.RawMessage
	if err := d.conn.Call(ctx, "transact", params, &res); err != nil {
		return nil, fmt.Errorf("transact on %s: %w", d.name, err)
	}
	for i, r := range res {
		var e struct {
			Error   string `json:"error"`
			Details string `json:"details"`
		}
		if json.Unmarshal(r, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("transact on %s: operation %d: %s: %s", d.name, i, e.Error, e.Details)
		}
	}
	if len(res) < len(ops) {
		return nil, fmt.Errorf("transact on %s: %d results for %d operations", d.name, len(res), len(ops))
	}
	return res, nil
}

// selectRows returns the rows of table with columns where cond holds.
func (d *db) selectRows(ctx context.Context, table string, where []any, columns ...string) ([]map[string]json.RawMessage, error) {
	if where == nil {
		where = []any{}
	}
	res, err := d.transact(ctx, Ops{{"op": "select", "table": table, "where": where, "columns": columns}})
	if err != nil {
		return nil, err
	}
	var r struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(res[0], &r); err != nil {
		return nil, fmt.Errorf("select from %s: %w", table, err)
	}
	return r.Rows, nil
}

// count is the number of rows in table.
func (d *db) count(ctx context.Context, table string) (int, error) {
	rows, err := d.selectRows(ctx, table, nil, "_uuid")
	return len(rows), err
}

// uuidOf returns the UUID of the row of table named name.
func (d *db) uuidOf(ctx context.Context, table, name string) (string, error) {
	rows, err := d.selectRows(ctx, table, []any{[]any{"name", "==", name}}, "_uuid")
	if err != nil {
		return "", err
	}
	if len(rows) != 1 {
		return "", fmt.Errorf("%d rows of %s named %s", len(rows), table, name)
	}
	var u []string
	if err := json.Unmarshal(rows[0]["_uuid"], &u); err != nil || len(u) != 2 {
		return "", fmt.Errorf("%s %s: bad _uuid %s", table, name, rows[0]["_uuid"])
	}
	return u[1], nil
}

// sbCfg returns NB_Global's nb_cfg and sb_cfg.
func (d *db) sbCfg(ctx context.Context) (nbCfg, sbCfg int64, err error) {
	rows, err := d.selectRows(ctx, "NB_Global", nil, "nb_cfg", "sb_cfg")
	if err != nil {
		return 0, 0, err
	}
	if len(rows) != 1 {
		return 0, 0, fmt.Errorf("%d NB_Global rows", len(rows))
	}
	if err := json.Unmarshal(rows[0]["nb_cfg"], &nbCfg); err != nil {
		return 0, 0, err
	}
	err = json.Unmarshal(rows[0]["sb_cfg"], &sbCfg)
	return nbCfg, sbCfg, err
}

// call runs a control socket command.
func call(ctx context.Context, ctl, command string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return unixctl.Call(ctx, ctl, command, args...)
}

// engineStats parses inc-engine/show-stats: node, stat, count.
func engineStats(text string) map[string]map[string]int {
	out := make(map[string]map[string]int)
	var node map[string]int
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if n, ok := strings.CutPrefix(line, "Node: "); ok {
			node = make(map[string]int)
			out[n] = node
			continue
		}
		if s, ok := strings.CutPrefix(line, "- "); ok && node != nil {
			name, val, ok := strings.Cut(s, ":")
			if !ok {
				continue
			}
			if v, err := strconv.Atoi(strings.TrimSpace(val)); err == nil {
				node[strings.TrimSpace(name)] = v
			}
		}
	}
	return out
}

// nbctlDaemon is a persistent ovn-nbctl (--detach) on one Northbound.
type nbctlDaemon struct {
	sock string
	pid  int
}

func startNbctl(ctx context.Context, bin, dir, nbSock string) (*nbctlDaemon, error) {
	out, err := os.Create(filepath.Join(dir, "nbctl.out"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	pidfile := filepath.Join(dir, "nbctl.pid")
	cmd := exec.CommandContext(ctx, bin, "--db=unix:"+nbSock, "--detach", "--no-chdir", "--pidfile="+pidfile,
		"--log-file="+filepath.Join(dir, "nbctl.log"))
	cmd.Env = append(os.Environ(), "OVN_RUNDIR="+dir, "OVS_RUNDIR="+dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		return nil, fmt.Errorf("starting ovn-nbctl --detach: %w: %s", err, b)
	}
	b, _ := os.ReadFile(out.Name())
	sock := strings.TrimSpace(string(b))
	pb, err := os.ReadFile(pidfile)
	if err != nil {
		return nil, fmt.Errorf("ovn-nbctl --detach: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pb)))
	if err != nil || sock == "" {
		return nil, fmt.Errorf("ovn-nbctl --detach printed %q, pidfile %q", sock, pb)
	}
	return &nbctlDaemon{sock: sock, pid: pid}, nil
}

// run runs ovn-nbctl OPTS ARGS in the daemon and returns how long it took
// and what it printed. It sends them to the daemon's control socket as
// the ovn-nbctl client does ("run" with the arguments), without starting
// an ovn-nbctl client process: exec'ing that binary alone takes about
// 6 ms here, before anything reaches the Northbound, which would be a
// floor under every latency that has nothing to do with either northd.
func (n *nbctlDaemon) run(ctx context.Context, args ...string) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := unixctl.Call(ctx, n.sock, "run", args...)
	took := time.Since(start)
	if err != nil {
		return took, "", fmt.Errorf("ovn-nbctl %s: %w", strings.Join(args, " "), err)
	}
	return took, strings.TrimSpace(out), nil
}

// stop ends the nbctl daemon the bench started, by its pid.
func (n *nbctlDaemon) stop() {
	if p, err := os.FindProcess(n.pid); err == nil {
		_ = p.Signal(syscall.SIGTERM)
	}
}

// errNotIdle says that a process did not go idle in time.
var errNotIdle = errors.New("did not go idle")

// busyUntilIdle waits until the process has used no CPU for quiet and
// returns when it was last busy (past start) and the CPU it used since
// start.
func busyUntilIdle(ctx context.Context, pid int, start time.Time, quiet, limit time.Duration) (last time.Time, cpu time.Duration, err error) {
	first, err := procstat.CPUTime(pid)
	if err != nil {
		return start, 0, err
	}
	prev, last := first, start
	const noise = 300 * time.Microsecond // a wakeup that does nothing
	for {
		select {
		case <-ctx.Done():
			return last, prev - first, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		now := time.Now()
		cur, err := procstat.CPUTime(pid)
		if err != nil {
			return last, prev - first, err
		}
		if cur-prev > noise {
			last = now
		}
		prev = cur
		if now.Sub(last) > quiet {
			return last, prev - first, nil
		}
		if now.Sub(start) > limit {
			return last, prev - first, errNotIdle
		}
	}
}
