package hvtest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRunToolArguments(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"no-such-tool"},
		{"http-serve", "127.0.0.1:0"},
		{"http-get"},
		{"dhcp4", "eth0", "extra"},
	} {
		if err := runTool(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("runTool %q: no error", args)
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
	err = waitFor(5*time.Second, "server on "+addr, func() bool {
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

// TestSweep leaves a namespace with a process in it under the name of a
// dead test process, as a killed run would, and checks that Sweep removes
// both while it keeps this process's own.
func TestSweep(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	// A pid that was just used and is now free, for a "dead run".
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadNS := runPrefix(gone.Process.Pid) + "sweeptest"
	ownNS := runPrefix(os.Getpid()) + "sweeptest"
	for _, ns := range []string{deadNS, ownNS} {
		mustRun(t, nil, "ip", "netns", "add", ns)
		t.Cleanup(func() { removeNS(ns) })
	}
	sleeper := exec.Command("ip", "netns", "exec", deadNS, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(waited) }()
	t.Cleanup(func() { _ = sleeper.Process.Kill(); <-waited })
	if err := waitFor(5*time.Second, "sleep in "+deadNS, func() bool {
		out, _ := exec.Command("ip", "netns", "pids", deadNS).Output()
		return strings.Contains(string(out), strconv.Itoa(sleeper.Process.Pid))
	}); err != nil {
		t.Fatal(err)
	}

	Sweep(t)
	if _, err := os.Stat("/run/netns/" + deadNS); !os.IsNotExist(err) {
		t.Errorf("namespace %s of a dead run survived the sweep (%v)", deadNS, err)
	}
	if _, err := os.Stat("/run/netns/" + ownNS); err != nil {
		t.Errorf("the sweep removed this run's namespace %s: %v", ownNS, err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Errorf("the process in %s survived the sweep", deadNS)
	}
}
