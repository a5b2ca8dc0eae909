package jsonrpc

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// OVSDB names connection endpoints as "unix:PATH" or "tcp:HOST:PORT" (to
// connect) and "punix:PATH" or "ptcp:PORT[:IP]" (to listen), as
// ovsdb-server(1) and the OVS tools do.

// DefaultPort is OVSDB's registered TCP port, used when "tcp:HOST" has none.
const DefaultPort = "6640"

// ParseTarget splits an active target ("unix:PATH", "tcp:IP:PORT") into the
// network and address that package net expects.
func ParseTarget(target string) (network, address string, err error) {
	kind, rest, ok := strings.Cut(target, ":")
	if !ok || rest == "" {
		return "", "", fmt.Errorf("jsonrpc: bad target %q: want unix:PATH or tcp:IP:PORT", target)
	}
	switch kind {
	case "unix":
		return "unix", rest, nil
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			// "tcp:IP" with the default port; IPv6 must then be bracketed.
			host, port = strings.Trim(rest, "[]"), DefaultPort
		}
		if host == "" {
			return "", "", fmt.Errorf("jsonrpc: bad target %q: no host", target)
		}
		return "tcp", net.JoinHostPort(host, port), nil
	}
	return "", "", fmt.Errorf("jsonrpc: bad target %q: want unix:PATH or tcp:IP:PORT", target)
}

// ParseListen splits a passive remote ("punix:PATH", "ptcp:PORT[:IP]") into
// the network and address that package net expects.
func ParseListen(remote string) (network, address string, err error) {
	kind, rest, ok := strings.Cut(remote, ":")
	if !ok || rest == "" {
		return "", "", fmt.Errorf("jsonrpc: bad remote %q: want punix:PATH or ptcp:PORT[:IP]", remote)
	}
	switch kind {
	case "punix":
		return "unix", rest, nil
	case "ptcp":
		port, ip, _ := strings.Cut(rest, ":")
		if port == "" {
			return "", "", fmt.Errorf("jsonrpc: bad remote %q: no port", remote)
		}
		return "tcp", net.JoinHostPort(strings.Trim(ip, "[]"), port), nil
	}
	return "", "", fmt.Errorf("jsonrpc: bad remote %q: want punix:PATH or ptcp:PORT[:IP]", remote)
}

// Dial connects to an active target such as "unix:/run/ovn/ovnnb_db.sock"
// or "tcp:127.0.0.1:6641".
func Dial(ctx context.Context, target string) (net.Conn, error) {
	network, address, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: connecting to %s: %w", target, err)
	}
	return nc, nil
}

// Listen listens on a passive remote such as "punix:/tmp/db.sock" or
// "ptcp:6641:127.0.0.1".
func Listen(ctx context.Context, remote string) (net.Listener, error) {
	network, address, err := ParseListen(remote)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: listening on %s: %w", remote, err)
	}
	return l, nil
}
