package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/govn/govn/internal/testpki"
	"github.com/govn/govn/ovsdb/server"
)

// testPKI is a CA and a directory to issue certificates into.
type testPKI struct {
	dir string
	ca  *testpki.CA
}

func newTestPKI(t *testing.T, name string) *testPKI {
	dir := t.TempDir()
	return &testPKI{dir: dir, ca: testpki.NewCA(t, dir, name)}
}

// options issues a certificate for name and returns the TLS options of
// a server that trusts caFiles (the PKI's own CA when none is given).
func (p *testPKI) options(t *testing.T, name string, caFiles ...string) server.TLSOptions {
	key, cert := p.ca.Issue(t, p.dir, name)
	ca := p.ca.File
	if len(caFiles) > 0 {
		ca = filepath.Join(p.dir, name+"-trusted.pem")
		var all []byte
		for _, f := range caFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		if err := os.WriteFile(ca, all, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return server.TLSOptions{PrivateKey: key, Certificate: cert, CACert: ca}
}

func freeSSLAddr(t *testing.T) string {
	return "ssl:" + strings.TrimPrefix(freeAddr(t), "tcp:")
}

// startTLS starts member i with TLS options o.
func (c *testCluster) startTLS(i int, o server.TLSOptions) {
	c.t.Helper()
	m := c.members[i]
	m.srv = server.New(server.Options{Logger: c.opts.Logger, ProbeInterval: -1})
	tc, err := m.srv.TLSConfigs(o)
	if err != nil {
		c.t.Fatal(err)
	}
	opts := c.opts
	opts.TLS = tc
	m.ctx, m.stop = context.WithCancel(context.Background())
	node, err := Start(m.ctx, m.path, m.srv, opts)
	if err != nil {
		c.t.Fatalf("starting member %d: %v", i, err)
	}
	m.node = node
}

// newSSLCluster is newCluster with ssl: addresses, each member with its
// own certificate from pki.
func newSSLCluster(t *testing.T, n int, pki *testPKI) *testCluster {
	c := &testCluster{t: t, dir: t.TempDir(), opts: Options{Logger: quietLogger(t)}}
	first := freeSSLAddr(t)
	t.Cleanup(func() {
		for i := range c.members {
			c.stopMember(i)
		}
	})
	for i := 0; i < n; i++ {
		path := filepath.Join(c.dir, fmt.Sprintf("s%d.db", i))
		var err error
		if i == 0 {
			err = Create(path, []byte(testSchema), first)
		} else {
			err = Join(path, "T", freeSSLAddr(t), []string{first})
		}
		if err != nil {
			t.Fatal(err)
		}
		c.members = append(c.members, &testMember{path: path})
		c.startTLS(i, pki.options(t, fmt.Sprintf("s%d", i)))
	}
	c.waitServed()
	return c
}

// members returns the ids in member i's raft configuration.
func (c *testCluster) configuration(i int) []string {
	f := c.members[i].node.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		ids = append(ids, string(s.ID))
	}
	return ids
}

func TestClusterOverSSL(t *testing.T) {
	pki := newTestPKI(t, "ca")
	c := newSSLCluster(t, 3, pki)
	l := c.leader()
	f := (l + 1) % 3
	insert(t, c.conn(l), "a", 1)
	insert(t, c.conn(f), "b", 2) // forwarded over TLS
	c.waitSame(`"a"=1/"eph-a" "b"=2/"eph-b"`)
	st := c.members[f].node.Status()
	if strings.Count(st, " at ssl:127.0.0.1:") != 3 {
		t.Errorf("cluster/status does not show three ssl: servers:\n%s", st)
	}
	// A restarted member comes back over TLS and catches up.
	c.stopMember(f)
	insert(t, c.conn(l), "c", 3)
	c.startTLS(f, pki.options(t, "s-again"))
	c.waitSame(`"a"=1/"eph-a" "b"=2/"eph-b" "c"=3/"eph-c"`)
}

func TestSSLPeerAddressNeedsTLSOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	if err := Create(path, []byte(testSchema), freeSSLAddr(t)); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Logger: quietLogger(t)})
	_, err := Start(context.Background(), path, srv, Options{Logger: quietLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "--private-key") {
		t.Fatalf("Start of an ssl: member without TLS options: %v", err)
	}
}

func TestJoinRefusesMixedSchemes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	err := Join(path, "T", "ssl:127.0.0.1:6643", []string{"tcp:127.0.0.1:6644"})
	if err == nil || !strings.Contains(err.Error(), "must all be ssl:") {
		t.Fatalf("Join with an ssl: address and a tcp: remote: %v", err)
	}
}

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"tcp:127.0.0.1:6643", "127.0.0.1:6643", ""},
		{"ssl:127.0.0.1:6643", "127.0.0.1:6643", ""},
		{"ssl:[::1]:6643", "[::1]:6643", ""},
		{"unix:/tmp/x", "", "tcp:IP:PORT or ssl:IP:PORT"},
		{"ssl:host:6643", "", "not an IP address"},
		{"ssl:127.0.0.1:0", "", "needs a port"},
		{"ssl:127.0.0.1", "", "missing port"},
		{"ssl:127.0.0.1:65536", "", "needs a port"},
		{"tcp:127.0.0.1:http", "", "needs a port"},
		{"127.0.0.1:6643", "", "tcp:IP:PORT or ssl:IP:PORT"},
	} {
		got, err := ParseAddress(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAddress(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// outsider is a server that is no member: it dials from ip, saying
// hello h, with TLS configuration tc (nil: TCP).
func outsider(t *testing.T, tc PeerTLS, h hello, ip string) (*peerLayer, *raft.NetworkTransport) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &peerLayer{l: l, localIP: net.ParseIP(ip), raftC: make(chan net.Conn), done: make(chan struct{}),
		cfg: peerConfig{TLS: tc, Self: func() hello { return h }, Log: quietLogger(t),
			Admit: func(hello, net.Addr) error { return errors.New("an outsider admits no one") },
			Ctrl:  func(c net.Conn, _ hello, _ func() error) { c.Close() }}}
	go p.run()
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: p, MaxPool: 1, Timeout: 5 * time.Second})
	t.Cleanup(func() { trans.Close() })
	return p, trans
}

// intrude has the outsider try what a member does: forward a transaction
// and, as a leader of a later term, append entries (which would depose the
// leader). Both must fail, and the leader must keep its term.
func intrude(t *testing.T, c *testCluster, p *peerLayer, trans *raft.NetworkTransport, h hello, want string) {
	t.Helper()
	l := c.leader()
	leader := c.members[l].node
	target, _ := ParseAddress(leader.local)
	term := leader.raft.CurrentTerm()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params, _ := json.Marshal([]any{"T", map[string]any{"op": "insert", "table": "R", "row": map[string]any{"name": "intruder"}}})
	resp, err := p.call(ctx, target, &request{Op: "txn", Params: params})
	switch {
	case err == nil && resp.Error == "":
		t.Errorf("the leader executed an outsider's transaction: %+v", resp)
	case err == nil && !strings.Contains(resp.Error, want):
		t.Errorf("outsider's transaction: %q, want %q", resp.Error, want)
	}
	var out raft.AppendEntriesResponse
	err = trans.AppendEntries(raft.ServerID(leader.sid.String()), raft.ServerAddress(target), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte(h.SID), Addr: []byte(h.Addr)},
		Term:      term + 100, Leader: []byte(h.Addr),
	}, &out)
	if err == nil {
		t.Errorf("the leader answered an outsider's AppendEntries: %+v", out)
	}
	if got := leader.raft.CurrentTerm(); got != term || leader.raft.State() != raft.Leader {
		t.Errorf("after the outsider's AppendEntries the leader is %v in term %d (was term %d)", leader.raft.State(), got, term)
	}
	if strings.Contains(c.names(l), "intruder") {
		t.Errorf("the outsider's row is in the database: %s", c.names(l))
	}
}

func TestClusterRefusesServersWithoutTheCAsCertificate(t *testing.T) {
	pki := newTestPKI(t, "ca")
	c := newSSLCluster(t, 3, pki)
	other := newTestPKI(t, "other-ca")

	// A server whose certificate another CA signed (and that trusts both
	// CAs, so that only the members' check of its certificate stops it)
	// cannot talk to the members ...
	h := hello{SID: "5c1f0a36-1d5e-4c3c-9d56-2f7a0e2f3b11", Addr: "127.0.0.1:1"}
	p, trans := outsider(t, mustTLS(t, other.options(t, "intruder", pki.ca.File, other.ca.File)), h, "127.0.0.1")
	intrude(t, c, p, trans, h, "TLS")

	// ... nor join.
	path := filepath.Join(c.dir, "joiner.db")
	if err := Join(path, "T", freeSSLAddr(t), []string{c.members[0].node.local}); err != nil {
		t.Fatal(err)
	}
	c.members = append(c.members, &testMember{path: path})
	c.startTLS(3, other.options(t, "joiner", pki.ca.File, other.ca.File))
	time.Sleep(3 * time.Second) // the joiner asks every 250 ms
	if ids := c.configuration(c.leader()); len(ids) != 3 {
		t.Errorf("the cluster has %d servers, want 3: %v", len(ids), ids)
	}
	if c.members[3].node.rep.Load() != nil {
		t.Error("a server with another CA's certificate got the database")
	}
}

func mustTLS(t *testing.T, o server.TLSOptions) *server.TLSConfigs {
	t.Helper()
	tc, err := server.New(server.Options{Logger: quietLogger(t)}).TLSConfigs(o)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestClusterRefusesNonMembers(t *testing.T) {
	pki := newTestPKI(t, "ca")
	c := newSSLCluster(t, 3, pki)
	valid := mustTLS(t, pki.options(t, "outsider"))

	t.Run("unknown server", func(t *testing.T) {
		h := hello{SID: "5c1f0a36-1d5e-4c3c-9d56-2f7a0e2f3b11", Addr: "127.0.0.1:1"}
		p, trans := outsider(t, valid, h, "127.0.0.1")
		intrude(t, c, p, trans, h, "refused")
	})
	t.Run("member's id at another address", func(t *testing.T) {
		m := c.members[(c.leader()+1)%3].node
		h := hello{SID: m.sid.String(), Addr: "127.0.0.1:1"}
		p, trans := outsider(t, valid, h, "127.0.0.1")
		intrude(t, c, p, trans, h, "refused")
	})
	t.Run("member's id and address from another IP", func(t *testing.T) {
		m := c.members[(c.leader()+1)%3].node
		addr, _ := ParseAddress(m.local)
		h := hello{SID: m.sid.String(), Addr: addr}
		p, trans := outsider(t, valid, h, "127.0.0.2")
		intrude(t, c, p, trans, h, "refused")
	})
	t.Run("another cluster's member", func(t *testing.T) {
		m := c.members[(c.leader()+1)%3].node
		addr, _ := ParseAddress(m.local)
		h := hello{SID: m.sid.String(), Addr: addr, CID: "0d6a35a1-8c8e-4bd3-a1c2-7b5f3c0e9d42"}
		p, trans := outsider(t, valid, h, "127.0.0.1")
		intrude(t, c, p, trans, h, "refused")
	})
	t.Run("kicked member", func(t *testing.T) {
		l := c.leader()
		k := (l + 1) % 3
		kicked := c.members[k].node
		if _, err := c.members[l].node.Kick(context.Background(), kicked.sid.String()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the kick", 10*time.Second, func() bool { return len(c.configuration(c.leader())) == 2 })
		addr, _ := ParseAddress(kicked.local)
		h := hello{SID: kicked.sid.String(), Addr: addr, CID: kicked.cid.Load().String()}
		p, trans := outsider(t, valid, h, "127.0.0.1")
		intrude(t, c, p, trans, h, "refused")
	})
}

func TestTCPClusterRefusesNonMembers(t *testing.T) {
	c := newCluster(t, 3, Options{})
	h := hello{SID: "5c1f0a36-1d5e-4c3c-9d56-2f7a0e2f3b11", Addr: "127.0.0.1:1"}
	p, trans := outsider(t, nil, h, "127.0.0.1")
	intrude(t, c, p, trans, h, "refused")
}

// FuzzReadHello feeds readHello arbitrary connection openings: it must
// return a hello or an error without crashing or reading past the line.
func FuzzReadHello(f *testing.F) {
	f.Add([]byte("H{\"sid\":\"5c1f0a36-1d5e-4c3c-9d56-2f7a0e2f3b11\",\"addr\":\"127.0.0.1:6643\"}\nG"))
	f.Add([]byte("G{}\n"))
	f.Add([]byte("H{\n"))
	f.Add([]byte("H" + strings.Repeat("x", maxHello+10) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(strings.NewReader(string(data)), maxHello)
		h, err := readHello(br)
		if err != nil {
			return
		}
		if data[0] != helloByte {
			t.Fatalf("read hello %+v from %q", h, data)
		}
		rest, _ := br.ReadString(0)
		if !strings.HasSuffix(string(data), "\n"+rest) {
			t.Fatalf("readHello read past its line: rest %q of %q", rest, data)
		}
	})
}

func TestForwardingReusesItsConnection(t *testing.T) {
	pki := newTestPKI(t, "ca")
	c := newSSLCluster(t, 3, pki)
	// Every join's request has had its reply (it may still be under
	// way when the member already serves the database).
	waitFor(t, "every member to know the cluster id", 10*time.Second, func() bool {
		for _, m := range c.members {
			if m.node.cid.Load() == nil {
				return false
			}
		}
		return true
	})
	l := c.leader()
	f := (l + 1) % 3
	conn := c.conn(f)
	for i := 0; i < 10; i++ {
		insert(t, conn, fmt.Sprintf("r%d", i), i)
	}
	layer := c.members[f].node.layer
	leaderAddr, _ := ParseAddress(c.members[l].node.local)
	layer.mu.Lock()
	idle := len(layer.idle[leaderAddr])
	layer.mu.Unlock()
	if idle != 1 {
		t.Errorf("after 10 forwarded transactions the follower keeps %d idle connections to the leader, want 1", idle)
	}
	// The leader stops, closing the connections it serves: the
	// follower no longer offers its idle one, and forwards to the new
	// leader.
	c.stopMember(l)
	waitFor(t, "the follower to notice the closed connection", 5*time.Second, func() bool {
		cc := layer.takeIdle(leaderAddr)
		if cc != nil {
			layer.putIdle(leaderAddr, cc)
		}
		return cc == nil
	})
	nl := c.leader()
	insert(t, c.conn(3-l-nl), "after", 0)
}

// FuzzParseAddress: a peer address parses to raft's IP:PORT, or is
// refused, without crashing.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"tcp:127.0.0.1:6643", "ssl:[::1]:6643", "ssl:", "tcp:[::1", "unix:/x", "ssl:1.2.3.4:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hp, err := ParseAddress(s)
		if err != nil {
			return
		}
		host, port, err := net.SplitHostPort(hp)
		if n, perr := strconv.Atoi(port); err != nil || net.ParseIP(host) == nil || perr != nil || n < 1 || n > 65535 {
			t.Fatalf("ParseAddress(%q) = %q, which is not IP:PORT", s, hp)
		}
	})
}
