package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// ParseAddress turns an ovsdb-tool style peer address, "tcp:IP:PORT", into
// raft's "IP:PORT". IPv6 addresses go in brackets: tcp:[::1]:6643.
func ParseAddress(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, "tcp:")
	if !ok {
		if strings.HasPrefix(s, "ssl:") {
			return "", fmt.Errorf("%s: ssl peer addresses are not supported yet (use tcp:IP:PORT)", s)
		}
		return "", fmt.Errorf("%s: a peer address is tcp:IP:PORT", s)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s, err)
	}
	if net.ParseIP(host) == nil {
		return "", fmt.Errorf("%s: %q is not an IP address", s, host)
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("%s: a peer address needs a port", s)
	}
	return net.JoinHostPort(host, port), nil
}

// ctrlByte begins a connection carrying one of govn's own requests; raft's
// NetworkTransport begins each connection with an RPC type, a small
// number.
const ctrlByte = 'G'

// peerLayer is the raft.StreamLayer of a member: it listens on the
// member's address for raft's RPCs and for govn's requests (join, remove,
// forwarded transactions, the election timer), telling them apart by the
// first byte.
type peerLayer struct {
	l     net.Listener
	raftC chan net.Conn
	ctrl  func(net.Conn)
	once  sync.Once
	done  chan struct{}
}

func newPeerLayer(l net.Listener, ctrl func(net.Conn)) *peerLayer {
	p := &peerLayer{l: l, raftC: make(chan net.Conn), ctrl: ctrl, done: make(chan struct{})}
	go p.run()
	return p
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

func (p *peerLayer) classify(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if b[0] == ctrlByte {
		p.ctrl(c)
		return
	}
	pc := &prefixConn{Conn: c, r: io.MultiReader(strings.NewReader(string(b[:])), c)}
	select {
	case p.raftC <- pc:
	case <-p.done:
		c.Close()
	}
}

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
		close(p.done)
		err = p.l.Close()
	})
	return err
}

func (p *peerLayer) Addr() net.Addr { return p.l.Addr() }

func (p *peerLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
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

// call sends req to the member at addr and reads its response.
func call(ctx context.Context, addr string, req *request) (*response, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(append(append([]byte{ctrlByte}, b...), '\n')); err != nil {
		return nil, fmt.Errorf("sending %s request to %s: %w", req.Op, addr, err)
	}
	line, err := bufio.NewReaderSize(c, 64<<10).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("reading %s response from %s: %w", req.Op, addr, err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("%s response from %s: %w", req.Op, addr, err)
	}
	return &resp, nil
}

// serveCtrl answers one request on c with handle.
func serveCtrl(c net.Conn, handle func(*request) *response) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReaderSize(c, 64<<10).ReadBytes('\n')
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var req request
	var resp *response
	if err := json.Unmarshal(line, &req); err != nil {
		resp = &response{Error: fmt.Sprintf("bad request: %v", err)}
	} else {
		resp = handle(&req)
	}
	b, _ := json.Marshal(resp)
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	c.Write(append(b, '\n'))
}
