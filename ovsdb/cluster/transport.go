package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// ParseAddress turns an ovsdb-tool style peer address, "tcp:IP:PORT" or
// "ssl:IP:PORT", into raft's "IP:PORT". IPv6 addresses go in brackets:
// tcp:[::1]:6643.
func ParseAddress(s string) (string, error) {
	_, hp, err := parsePeer(s)
	return hp, err
}

// parsePeer splits a peer address into its scheme (tcp or ssl) and raft's
// "IP:PORT".
func parsePeer(s string) (scheme, hostPort string, err error) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || (scheme != "tcp" && scheme != "ssl") {
		return "", "", fmt.Errorf("%s: a peer address is tcp:IP:PORT or ssl:IP:PORT", s)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", s, err)
	}
	if net.ParseIP(host) == nil {
		return "", "", fmt.Errorf("%s: %q is not an IP address", s, host)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("%s: a peer address needs a port (1-65535)", s)
	}
	return scheme, net.JoinHostPort(host, port), nil
}

// checkSchemes requires the remotes a server joins through to use its own
// address's scheme: a cluster's peers all talk TCP or all TLS.
func checkSchemes(local string, remotes []string) error {
	ls, _, err := parsePeer(local)
	if err != nil {
		return err
	}
	for _, r := range remotes {
		rs, _, err := parsePeer(r)
		if err != nil {
			return err
		}
		if rs != ls {
			return fmt.Errorf("%s: the cluster's addresses must all be %s: like %s", r, ls, local)
		}
	}
	return nil
}

// PeerTLS gives the TLS configurations of a member's peer connections
// when its address is ssl: (server.TLSConfigs, from govn db's
// --private-key, --certificate and --ca-cert). Both sides must present a
// certificate the CA signed.
type PeerTLS interface {
	ServerConfig() (*tls.Config, error)
	ClientConfig() (*tls.Config, error)
}

// Every peer connection begins with a hello from the server that dialed:
// helloByte, then a JSON hello and a newline. Then comes either ctrlByte
// and one of govn's requests, or raft's RPCs (raft's NetworkTransport
// begins each with an RPC type, a small number).
const (
	helloByte = 'H'
	ctrlByte  = 'G'
	// maxHello bounds a hello's line.
	maxHello = 4096
	// handshakeTimeout bounds the TLS handshake and the hello.
	handshakeTimeout = 10 * time.Second
)

// hello says who dialed: its server id, its address (raft's IP:PORT) and
// its cluster's id, when it knows it yet.
type hello struct {
	SID  string `json:"sid"`
	Addr string `json:"addr"`
	CID  string `json:"cid,omitempty"`
}

// peerConfig configures a peerLayer.
type peerConfig struct {
	// TLS is set for an ssl: member: every connection, both ways, is
	// TLS with certificates the CA signed.
	TLS PeerTLS
	// Self is the hello this member sends when it dials.
	Self func() hello
	// Admit checks the server that dialed, as it said in its hello, from
	// remote: an error says it is not a member, and then its raft RPCs
	// are refused and of its requests only join is answered.
	Admit func(h hello, remote net.Addr) error
	// Ctrl answers govn's requests on c; admit is Admit for the sender.
	Ctrl func(c net.Conn, h hello, admit func() error)
	Log  *slog.Logger
}

// peerLayer is the raft.StreamLayer of a member: it listens on the
// member's address for raft's RPCs and for govn's requests (join, remove,
// forwarded transactions, the election timer), telling them apart by the
// first byte after the hello, and dials the other members.
type peerLayer struct {
	l       net.Listener
	cfg     peerConfig
	localIP net.IP // dialed connections come from the member's own address
	raftC   chan net.Conn
	once    sync.Once
	done    chan struct{}

	mu      sync.Mutex
	idle    map[string][]*ctrlConn // by member address, for call
	serving map[net.Conn]bool      // request connections being served
}

// listenPeers listens on the member address local (tcp:IP:PORT or
// ssl:IP:PORT); an ssl: address needs cfg.TLS.
func listenPeers(local string, cfg peerConfig) (*peerLayer, error) {
	scheme, addr, err := parsePeer(local)
	if err != nil {
		return nil, err
	}
	switch {
	case scheme == "ssl" && cfg.TLS == nil:
		return nil, fmt.Errorf("%s: an ssl: peer address needs --private-key, --certificate and --ca-cert", local)
	case scheme == "tcp":
		cfg.TLS = nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for peers on %s: %w", local, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	p := &peerLayer{l: l, cfg: cfg, raftC: make(chan net.Conn), done: make(chan struct{})}
	if ip := net.ParseIP(host); !ip.IsUnspecified() {
		p.localIP = ip
	}
	go p.run()
	return p, nil
}

func (p *peerLayer) run() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go p.classify(c)
	}
}

// refuse closes a connection the member will not serve, saying why in
// its log.
func (p *peerLayer) refuse(c net.Conn, why string, err error) {
	p.cfg.Log.Warn("refusing peer connection", "remote", c.RemoteAddr(), "reason", why, "err", err)
	c.Close()
}

// classify authenticates a connection (TLS), reads its hello, and passes
// it to raft or to the request handler.
func (p *peerLayer) classify(c net.Conn) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	if p.cfg.TLS != nil {
		conf, err := p.cfg.TLS.ServerConfig()
		if err != nil {
			p.refuse(c, "no TLS configuration", err)
			return
		}
		tc := tls.Server(c, conf)
		if err := tc.Handshake(); err != nil {
			p.refuse(c, "TLS handshake failed", err)
			return
		}
		c = tc
	}
	br := bufio.NewReaderSize(c, maxHello)
	h, err := readHello(br)
	if err != nil {
		p.refuse(c, "no hello", err)
		return
	}
	b, err := br.ReadByte()
	if err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	remote := c.RemoteAddr()
	if b == ctrlByte {
		pc := &prefixConn{Conn: c, r: br}
		if !p.track(pc, true) {
			c.Close()
			return
		}
		defer p.track(pc, false)
		p.cfg.Ctrl(pc, h, func() error { return p.cfg.Admit(h, remote) })
		return
	}
	if admitErr := p.cfg.Admit(h, remote); admitErr != nil {
		p.refuse(c, "not a member", admitErr)
		return
	}
	br.UnreadByte()
	select {
	case p.raftC <- &prefixConn{Conn: c, r: br}:
	case <-p.done:
		c.Close()
	}
}

// track adds c to the request connections being served (false once the
// layer is closed) or removes it, so that Close closes them too.
func (p *peerLayer) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.serving, c)
		return true
	}
	select {
	case <-p.done:
		return false
	default:
	}
	if p.serving == nil {
		p.serving = map[net.Conn]bool{}
	}
	p.serving[c] = true
	return true
}

func readHello(br *bufio.Reader) (hello, error) {
	var h hello
	b, err := br.ReadByte()
	if err != nil {
		return h, err
	}
	if b != helloByte {
		return h, fmt.Errorf("connection begins with byte %#x, not a hello", b)
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("reading hello: %w", err)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("bad hello: %w", err)
	}
	return h, nil
}

// prefixConn reads through r, which holds what classify read ahead.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

var errLayerClosed = errors.New("peer listener closed")

func (p *peerLayer) Accept() (net.Conn, error) {
	select {
	case c := <-p.raftC:
		return c, nil
	case <-p.done:
		return nil, errLayerClosed
	}
}

func (p *peerLayer) Close() error {
	var err error
	p.once.Do(func() {
		p.mu.Lock()
		close(p.done)
		for _, q := range p.idle {
			for _, cc := range q {
				cc.c.Close()
			}
		}
		p.idle = nil
		for c := range p.serving {
			c.Close()
		}
		p.mu.Unlock()
		err = p.l.Close()
	})
	return err
}

func (p *peerLayer) Addr() net.Addr { return p.l.Addr() }

// Dial is raft's: a connection to the member at addr, hello sent.
func (p *peerLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.dial(ctx, string(addr))
}

// dial connects to the member at addr (IP:PORT) from this member's IP,
// shakes hands (TLS) and says hello. Every error is a *net.OpError whose
// Op is "dial": nothing was sent yet, so a request may be retried.
func (p *peerLayer) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: handshakeTimeout}
	if p.localIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: p.localIP}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if errors.Is(err, syscall.EADDRNOTAVAIL) && d.LocalAddr != nil {
		// The member's address is not this host's (NAT): dial from
		// any; the other member will say why it refuses.
		d.LocalAddr = nil
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	fail := func(err error) (net.Conn, error) {
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: c.RemoteAddr(), Err: err}
	}
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	if p.cfg.TLS != nil {
		conf, err := p.cfg.TLS.ClientConfig()
		if err != nil {
			return fail(err)
		}
		tc := tls.Client(c, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("TLS handshake: %w", err))
		}
		c = tc
	}
	b, err := json.Marshal(p.cfg.Self())
	if err != nil {
		return fail(err)
	}
	if _, err := c.Write(append(append([]byte{helloByte}, b...), '\n')); err != nil {
		return fail(fmt.Errorf("sending hello: %w", err))
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// request is one of govn's requests to a member.
type request struct {
	Op string `json:"op"` // join, remove, txn, timer
	// join: the new member; remove: the member to remove
	SID  string `json:"sid,omitempty"`
	Addr string `json:"addr,omitempty"`
	Name string `json:"name,omitempty"`
	// txn: a transact request's params
	Params json.RawMessage `json:"params,omitempty"`
	// timer: the new election timer
	MS int64 `json:"ms,omitempty"`
}

// response answers a request. NotLeader with Leader (when known) says to
// ask the leader instead.
type response struct {
	Error     string          `json:"error,omitempty"`
	NotLeader bool            `json:"not_leader,omitempty"`
	Leader    string          `json:"leader,omitempty"`
	CID       string          `json:"cid,omitempty"`
	Reply     json.RawMessage `json:"reply,omitempty"`
	Index     uint64          `json:"index,omitempty"`
}

// A connection that carries govn's requests (after the hello and
// ctrlByte) carries any number of them, one at a time: a request line,
// then its response line. The caller keeps idle ones for the next
// request to the same member (no new handshake, hello and membership
// check for each forwarded transaction); the member closes one idle for
// ctrlIdleTimeout.
const (
	ctrlIdleTimeout = 30 * time.Second
	// ctrlReuse is how long an idle connection is reused: well before
	// the member closes it.
	ctrlReuse = 20 * time.Second
	// maxIdlePerPeer bounds the idle connections kept for each member.
	maxIdlePerPeer = 4
)

// ctrlConn is a connection for govn's requests.
type ctrlConn struct {
	c     net.Conn
	br    *bufio.Reader
	since time.Time // idle since
}

// takeIdle returns an idle connection to addr that still looks open, if
// there is one.
func (p *peerLayer) takeIdle(addr string) *ctrlConn {
	for {
		p.mu.Lock()
		q := p.idle[addr]
		if len(q) == 0 {
			p.mu.Unlock()
			return nil
		}
		cc := q[len(q)-1]
		p.idle[addr] = q[:len(q)-1]
		p.mu.Unlock()
		if time.Since(cc.since) < ctrlReuse && stillOpen(cc) {
			return cc
		}
		cc.c.Close()
	}
}

// stillOpen checks that the member has not closed an idle connection (it
// restarted, or timed the connection out): nothing to read, not EOF.
func stillOpen(cc *ctrlConn) bool {
	cc.c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := cc.br.Peek(1)
	cc.c.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// putIdle keeps cc for the next request to addr.
func (p *peerLayer) putIdle(addr string, cc *ctrlConn) {
	cc.since = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		cc.c.Close()
		return
	default:
	}
	if len(p.idle[addr]) >= maxIdlePerPeer {
		cc.c.Close()
		return
	}
	if p.idle == nil {
		p.idle = map[string][]*ctrlConn{}
	}
	p.idle[addr] = append(p.idle[addr], cc)
}

// call sends req to the member at addr and reads its response. An error
// from dialing (a *net.OpError whose Op is "dial") means the request was
// not sent.
func (p *peerLayer) call(ctx context.Context, addr string, req *request) (*response, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	cc := p.takeIdle(addr)
	if cc == nil {
		c, err := p.dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		cc = &ctrlConn{c: c, br: bufio.NewReaderSize(c, 64<<10)}
		b = append([]byte{ctrlByte}, b...)
	}
	ok := false
	defer func() {
		if !ok {
			cc.c.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { cc.c.SetDeadline(time.Now()) })
	if _, err := cc.c.Write(b); err != nil {
		stop()
		return nil, fmt.Errorf("sending %s request to %s: %w", req.Op, addr, err)
	}
	line, err := cc.br.ReadBytes('\n')
	// A connection whose deadline the context set is not reused.
	reusable := stop()
	if err != nil {
		return nil, fmt.Errorf("reading %s response from %s: %w", req.Op, addr, err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("%s response from %s: %w", req.Op, addr, err)
	}
	if reusable {
		ok = true
		p.putIdle(addr, cc)
	}
	return &resp, nil
}

// serveCtrl answers requests on c with handle until the caller closes c
// or leaves it idle for ctrlIdleTimeout. A server that is not a member
// (admit says why) may only ask to join, as itself; admit is asked again
// for each request, as a member may have been removed meanwhile.
func serveCtrl(c net.Conn, h hello, admit func() error, handle func(*request) *response) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(ctrlIdleTimeout))
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		c.SetReadDeadline(time.Time{})
		var req request
		var resp *response
		if err := json.Unmarshal(line, &req); err != nil {
			resp = &response{Error: fmt.Sprintf("bad request: %v", err)}
		} else if req.Op == "join" {
			if req.SID != h.SID || req.Addr != h.Addr {
				resp = &response{Error: fmt.Sprintf("server %s at %s may not ask for %s at %s to join", h.SID, h.Addr, req.SID, req.Addr)}
			} else {
				resp = handle(&req)
			}
		} else if err := admit(); err != nil {
			resp = &response{Error: fmt.Sprintf("%s request refused: %v", req.Op, err)}
		} else {
			resp = handle(&req)
		}
		b, _ := json.Marshal(resp)
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(append(b, '\n')); err != nil {
			return
		}
		c.SetWriteDeadline(time.Time{})
	}
}
