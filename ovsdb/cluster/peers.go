package cluster

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Who a member talks to: every connection to it says, in its hello, which
// server dialed (its id and address) and from which cluster. The member
// serves raft's RPCs and govn's requests only from the servers of its
// raft configuration, at their configured addresses, dialing from their
// address's IP; others may only ask to join. With ssl: addresses the TLS
// handshake has already required a certificate that the CA signed, so
// that a server without one gets no further; the hello then tells the
// members apart. (A server with a good certificate may still join, as
// with ovsdb-server: the CA is what decides who may be a member.)

// selfHello is the hello this member sends when it dials.
func (n *Node) selfHello() hello {
	addr, _ := ParseAddress(n.local)
	h := hello{SID: n.sid.String(), Addr: addr}
	if c := n.cid.Load(); c != nil {
		h.CID = c.String()
	}
	return h
}

// admit checks that the server that sent h from remote is a member.
func (n *Node) admit(h hello, remote net.Addr) error {
	select {
	case <-n.ready:
	case <-time.After(handshakeTimeout):
		return fmt.Errorf("raft is not running yet")
	}
	if c := n.cid.Load(); c != nil && h.CID != "" && h.CID != c.String() {
		return fmt.Errorf("server %s is a member of cluster %s, not of %s", h.SID, h.CID, c)
	}
	host, _, err := net.SplitHostPort(h.Addr)
	if err != nil {
		return fmt.Errorf("bad address %q in hello: %w", h.Addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("bad address %q in hello", h.Addr)
	}
	if ta, ok := remote.(*net.TCPAddr); ok && !ip.IsUnspecified() && !ip.Equal(ta.IP) {
		return fmt.Errorf("server %s says it is at %s but dialed from %s", h.SID, h.Addr, ta.IP)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		// A server that has not joined yet knows no members: the
		// leader adding it is the first to call.
		return nil
	}
	for _, s := range servers {
		if string(s.ID) != h.SID {
			continue
		}
		if s.Address != raft.ServerAddress(h.Addr) {
			return fmt.Errorf("server %s says it is at %s, but its address is %s", h.SID, h.Addr, s.Address)
		}
		return nil
	}
	return fmt.Errorf("server %s at %s is not a member", h.SID, h.Addr)
}
