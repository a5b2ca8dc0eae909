package difftest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/bench/ovsdbbench"
	"github.com/govn/govn/ovsdb/jsonrpc"
	"github.com/govn/govn/schema"
)

// govnCluster is a 3-server cluster of govn db or of the real
// ovsdb-server on loopback (ovsdbbench.Cluster, which "govn bench ovsdb
// --cluster" runs too).
type govnCluster struct {
	*ovsdbbench.Cluster
}

type clusterMember = ovsdbbench.Member

// startGovnCluster creates the clustered files of the databases shorts
// (nb, sb) with create-cluster on the first member and join-cluster on the
// others, starts the three members, and waits until every one serves
// every database as a cluster member.
func startGovnCluster(t testing.TB, shorts ...string) *govnCluster {
	return startCluster(t, kindGovn, shorts...)
}

// startCluster is startGovnCluster for a cluster of govn db (kindGovn) or
// of the real ovsdb-server (kindReal, files made by ovsdb-tool).
func startCluster(t testing.TB, kind string, shorts ...string) *govnCluster {
	t.Helper()
	need(t, "ovs-appctl")
	target := ovsdbbench.GovnCluster(govnBinary(t))
	if kind == kindReal {
		var err error
		if target, err = ovsdbbench.OvsdbServerCluster(); err != nil {
			t.Skip(err)
		}
	}
	var schemas [][]byte
	for _, short := range shorts {
		text, err := schema.Lookup(short)
		if err != nil {
			t.Fatal(err)
		}
		schemas = append(schemas, text)
	}
	c, err := ovsdbbench.StartCluster(t.Context(), target, "", false, schemas...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &govnCluster{c}
}

// restart starts the killed member m again.
func restart(t testing.TB, m *clusterMember) {
	t.Helper()
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// leader waits for a member other than not to lead db and returns it.
func (c *govnCluster) leader(t testing.TB, db string, not int) *clusterMember {
	t.Helper()
	l, err := c.Leader(t.Context(), db, not)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func waitUntil(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestClusterNorthdLflows is the acceptance test of clustered govn db with
// the real OVN: ovn-nbctl builds the features-a Northbound through a
// 3-server NB cluster (given all three remotes, it finds the leader), the
// real ovn-northd (all three remotes of each database) writes the
// Southbound of a 3-server SB cluster, and the logical flows, read through
// the cluster and from each member's own copy, equal those of a
// standalone govn db.
func TestClusterNorthdLflows(t *testing.T) {
	need(t, "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovs-appctl", "bash")
	script, err := filepath.Abs("../../testdata/reference/features-a.sh")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := startGovnCluster(t, "nb", "sb")
	startDaemon(t, c.Dir, "ovn-northd", "--no-chdir",
		"--ovnnb-db="+c.Remote(), "--ovnsb-db="+c.Remote(),
		"--pidfile="+filepath.Join(c.Dir, "northd.pid"),
		"--log-file="+filepath.Join(c.Dir, "northd.log"),
		"--unixctl="+filepath.Join(c.Dir, "northd.ctl"))
	alone := startCentral(t, kindGovn)

	var wg sync.WaitGroup
	var clusterOut, aloneOut string
	wg.Add(2)
	go func() {
		defer wg.Done()
		clusterOut = run(ctx, c.Dir, "env", "OVN_NB_DB="+c.Remote(), "bash", script) +
			run(ctx, c.Dir, "ovn-nbctl", "--db="+c.Remote(), "--wait=sb", "--timeout=30", "sync")
	}()
	go func() {
		defer wg.Done()
		aloneOut = run(ctx, alone.dir, "env", "OVN_NB_DB="+alone.nb.remote(), "bash", script) + alone.nbctl(ctx, "sync")
	}()
	wg.Wait()
	if !strings.Contains(clusterOut, "done") || strings.Contains(clusterOut, "[exit]") {
		t.Fatalf("features-a.sh through the cluster failed:\n%s", clusterOut)
	}
	if !strings.Contains(aloneOut, "done") || strings.Contains(aloneOut, "[exit]") {
		t.Fatalf("features-a.sh against a standalone govn db failed:\n%s", aloneOut)
	}
	want := alone.lflows(ctx)
	if strings.Count(want, "\n") < 100 {
		t.Fatalf("the standalone Southbound has only %d lines of lflows:\n%s", strings.Count(want, "\n"), want)
	}
	got := normalizeLflows(run(ctx, c.Dir, "ovn-sbctl", "--db="+c.Remote(), "lflow-list"))
	if got != want {
		diffTranscripts(t, "cluster-lflows", want, got)
	}
	// Every member's own copy (a follower answers reads itself).
	for _, m := range c.Members {
		var own string
		deadline := time.Now().Add(20 * time.Second)
		for {
			own = strings.Replace(normalizeLflows(run(ctx, c.Dir, "ovn-sbctl", "--db=unix:"+m.Sock, "--no-leader-only", "lflow-list")), " --no-leader-only", "", 1)
			if own == want || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if own != want {
			diffTranscripts(t, fmt.Sprintf("member-%d-lflows", m.Index), want, own)
		}
	}
	if t.Failed() {
		if b, err := os.ReadFile(filepath.Join(c.Dir, "northd.log")); err == nil {
			t.Logf("northd log tail:\n%s", tail(string(b), 2000))
		}
	}
}

// ovsdbConn is a JSON-RPC session to one member, for the fault test.
type ovsdbConn struct {
	conn *jsonrpc.Conn
}

func dialMember(m *clusterMember) (*ovsdbConn, error) {
	nc, err := net.DialTimeout("unix", m.Sock, time.Second)
	if err != nil {
		return nil, err
	}
	c := jsonrpc.New(context.Background(), nc, jsonrpc.Options{Handler: func(ctx context.Context, c *jsonrpc.Conn, msg *jsonrpc.Message) {
		if msg.Method == "echo" && msg.ID != nil {
			c.Reply(msg.ID, msg.Params)
		}
	}})
	c.Start()
	return &ovsdbConn{conn: c}, nil
}

// insertSwitch commits a Logical_Switch named name; nil only when the
// server acknowledged the commit.
func (c *ovsdbConn) insertSwitch(ctx context.Context, name string) error {
	res, err := c.conn.CallRaw(ctx, "transact", []any{"OVN_Northbound", map[string]any{"op": "insert", "table": "Logical_Switch", "row": map[string]any{"name": name}}})
	if err != nil {
		return err
	}
	if strings.Contains(string(res), `"error"`) {
		return fmt.Errorf("transact: %s", res)
	}
	return nil
}

// switchNames returns the Logical_Switch names in the member's own copy.
func (c *ovsdbConn) switchNames(ctx context.Context) ([]string, error) {
	res, err := c.conn.CallRaw(ctx, "transact", []any{"OVN_Northbound", map[string]any{"op": "select", "table": "Logical_Switch", "where": []any{}, "columns": []string{"name"}}})
	if err != nil {
		return nil, err
	}
	var out []struct {
		Rows []struct {
			Name string `json:"name"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(res, &out); err != nil || len(out) != 1 {
		return nil, fmt.Errorf("select: %s", res)
	}
	var names []string
	for _, r := range out[0].Rows {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return names, nil
}

// committer commits switches in a loop, round-robin over the members
// (followers forward to the leader), and records what was acknowledged.
type committer struct {
	c     *govnCluster
	mu    sync.Mutex
	acked []string
	fails int
	n     int
}

func (w *committer) run(ctx context.Context) {
	conns := make([]*ovsdbConn, len(w.c.Members))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.conn.Close()
			}
		}
	}()
	// A member that did not answer is left alone for a while, as a
	// client's inactivity probe would make it move on.
	skipUntil := make([]time.Time, len(conns))
	for i := 0; ctx.Err() == nil && i < 100000; i++ {
		k := i % len(conns)
		if time.Now().Before(skipUntil[k]) {
			time.Sleep(time.Millisecond)
			continue
		}
		m := w.c.Members[k]
		if conns[k] == nil || conns[k].conn.Err() != nil {
			c, err := dialMember(m)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			conns[k] = c
		}
		name := fmt.Sprintf("ft-%06d", i)
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := conns[k].insertSwitch(tctx, name)
		cancel()
		w.mu.Lock()
		w.n++
		if err == nil {
			w.acked = append(w.acked, name)
		} else {
			w.fails++
			if conns[k].conn.Err() == nil && tctx.Err() != nil {
				conns[k].conn.Close() // a stopped member: try it afresh later
				skipUntil[k] = time.Now().Add(2 * time.Second)
			}
		}
		w.mu.Unlock()
		if err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (w *committer) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// checkConverged waits until every running member holds the same
// switches, all acknowledged ones among them.
func (c *govnCluster) checkConverged(t *testing.T, acked []string) {
	t.Helper()
	var last [][]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		last = last[:0]
		ok := true
		for _, m := range c.Members {
			if !m.Running() {
				continue
			}
			oc, err := dialMember(m)
			if err != nil {
				ok = false
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			names, err := oc.switchNames(ctx)
			cancel()
			oc.conn.Close()
			if err != nil {
				ok = false
				break
			}
			last = append(last, names)
		}
		if ok && len(last) > 0 {
			same := true
			for _, l := range last[1:] {
				same = same && slices.Equal(l, last[0])
			}
			if same {
				var missing []string
				for _, a := range acked {
					if _, found := slices.BinarySearch(last[0], a); !found {
						missing = append(missing, a)
					}
				}
				if len(missing) > 0 {
					t.Fatalf("%d acknowledged transactions missing on every member: %v", len(missing), missing[:min(len(missing), 20)])
				}
				return
			}
		}
		if time.Now().After(deadline) {
			sizes := []int{}
			for _, l := range last {
				sizes = append(sizes, len(l))
			}
			t.Fatalf("members did not converge: they hold %v switches", sizes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterFaults is the fault test: a client commits in a loop against
// all three members while the leader is killed with SIGKILL five times in
// a row (each killed member restarted); after each kill a new leader
// takes over within two election timeouts, and in the end no acknowledged
// transaction is missing and the members are equal. Then partitions by
// SIGSTOP: with the followers stopped the lone leader refuses writes;
// with the leader stopped the two others elect a leader and go on
// committing; every member catches up once resumed.
func TestClusterFaults(t *testing.T) {
	need(t, "ovs-appctl")
	const electionTimer = time.Second
	c := startGovnCluster(t, "nb")
	const db = "OVN_Northbound"
	ctx, cancel := context.WithCancel(t.Context())
	w := &committer{c: c}
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	defer func() { cancel(); <-done }()

	waitUntil(t, "the first commits", 20*time.Second, func() bool { return w.ackedCount() >= 20 })
	var failovers []time.Duration
	for k := 0; k < 5; k++ {
		l := c.leader(t, db, -1)
		before := w.ackedCount()
		killed := time.Now()
		l.Kill()
		nl := c.leader(t, db, l.Index)
		failover := time.Since(killed)
		failovers = append(failovers, failover)
		// Allow for polling and a loaded machine on top of the two
		// election timeouts.
		if failover > 2*electionTimer+time.Second {
			t.Errorf("kill %d: member %d led %v after member %d was killed, more than two election timeouts", k+1, nl.Index, failover, l.Index)
		}
		waitUntil(t, "commits through the new leader", 20*time.Second, func() bool { return w.ackedCount() >= before+10 })
		restart(t, l)
		waitUntil(t, fmt.Sprintf("restarted member %d to rejoin", l.Index), 30*time.Second, func() bool {
			return strings.Contains(l.Status(db), "Status: cluster member") && strings.Contains(l.Status(db), "Role: follower")
		})
	}
	t.Logf("failover after SIGKILL of the leader (5 times): %v", failovers)

	// Partition: both followers stopped, the leader alone refuses writes.
	l := c.leader(t, db, -1)
	var followers []*clusterMember
	for _, m := range c.Members {
		if m != l {
			followers = append(followers, m)
		}
	}
	for _, f := range followers {
		f.Signal(syscall.SIGSTOP)
	}
	oc, err := dialMember(l)
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 3*electionTimer)
	if err := oc.insertSwitch(tctx, "minority-write"); err == nil {
		var states []string
		for _, m := range c.Members {
			st := "stopped"
			if m == l {
				st = l.Status(db)
			}
			states = append(states, fmt.Sprintf("member %d (pid %d): %s", m.Index, m.Pid(), st))
		}
		t.Errorf("member %d committed with both followers stopped at %v:\n%s", l.Index, time.Now().Format("15:04:05.000"), strings.Join(states, "\n"))
	}
	tcancel()
	oc.conn.Close()
	for _, f := range followers {
		f.Signal(syscall.SIGCONT)
	}
	l = c.leader(t, db, -1)
	before := w.ackedCount()
	waitUntil(t, "commits after the followers resumed", 20*time.Second, func() bool { return w.ackedCount() >= before+10 })

	// Partition: the leader stopped, the majority elects another and
	// keeps committing; the old leader catches up once resumed.
	l.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	nl := c.leader(t, db, l.Index)
	t.Logf("member %d leads %v after the leader was stopped", nl.Index, time.Since(stopped))
	before = w.ackedCount()
	waitUntil(t, "commits by the majority", 20*time.Second, func() bool { return w.ackedCount() >= before+10 })
	l.Signal(syscall.SIGCONT)
	waitUntil(t, "the old leader to follow", 20*time.Second, func() bool { return strings.Contains(l.Status(db), "Role: follower") })

	cancel()
	<-done
	w.mu.Lock()
	acked := slices.Sorted(slices.Values(w.acked))
	t.Logf("%d transactions acknowledged, %d refused or failed, of %d", len(acked), w.fails, w.n)
	w.mu.Unlock()
	c.checkConverged(t, acked)
	if slices.Contains(acked, "minority-write") {
		t.Errorf("the minority's write was acknowledged")
	}
	if t.Failed() {
		for _, m := range c.Members {
			t.Logf("member %d log tail:\n%s", m.Index, m.LogTail())
		}
	}
}
