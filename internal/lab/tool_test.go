package lab

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"
)

func TestRunToolArguments(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"no-such-tool"},
		{"http-serve", "127.0.0.1:0"},
		{"http-get"},
		{"udp-serve", "127.0.0.1:0"},
		{"dhcp4", "eth0", "extra"},
		{"miss-flood", "eth0", "1000", "1s", "0a:00:00:00:00:01"},
		{"miss-flood", "eth0", "0", "1s", "0a:00:00:00:00:01", "10.2.0.0/16"},
		{"miss-flood", "eth0", "1000", "soon", "0a:00:00:00:00:01", "10.2.0.0/16"},
		{"miss-flood", "eth0", "1000", "1s", "not-a-mac", "10.2.0.0/16"},
		{"miss-flood", "eth0", "1000", "1s", "0a:00:00:00:00:01", "fd00::/64"},
	} {
		if err := RunTool(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("RunTool %q: no error", args)
		}
	}
}

// TestHTTPTools runs the server and the client on loopback: every GET
// gets the server's body.
func TestHTTPTools(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // httpServe listens itself; the port is free again
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpServe(ctx, addr, "backend-7") }()
	var out bytes.Buffer
	err = WaitFor(5*time.Second, "server on "+addr, func() bool {
		out.Reset()
		return httpGet(context.Background(), "http://"+addr+"/", &out) == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "backend-7\n" {
		t.Errorf("body %q, want %q", out.String(), "backend-7\n")
	}
	out.Reset()
	if err := httpGet(context.Background(), "http://"+addr+"/ip", &out); err != nil || out.String() != "127.0.0.1\n" {
		t.Errorf("GET /ip: %q, %v; want the client's address 127.0.0.1", out.String(), err)
	}
	out.Reset()
	if err := httpGet(context.Background(), "http://"+addr+"/peer", &out); err != nil || out.String() != "backend-7 127.0.0.1\n" {
		t.Errorf("GET /peer: %q, %v; want the body and the client's address", out.String(), err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("server: %v", err)
	}
	if err := httpGet(context.Background(), "http://"+addr+"/", &out); err == nil {
		t.Errorf("GET after the server stopped: no error")
	}
}

// TestUDPServe: every datagram to udp-serve is answered with its body.
func TestUDPServe(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- udpServe(ctx, addr, "backend-8") }()
	c, err := net.Dial("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	got := ""
	for i := 0; i < 50 && got == ""; i++ { // until the server listens
		c.Write([]byte("ping"))
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, err := c.Read(buf); err == nil {
			got = string(buf[:n])
		} else {
			time.Sleep(20 * time.Millisecond) // refused: not yet listening
		}
	}
	if got != "backend-8" {
		t.Errorf("answer %q, want backend-8", got)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("udp-serve: %v", err)
	}
}
