package readpoll

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair returns a Conn of a new Poller and the blocking peer socket.
func pair(t *testing.T) (*Poller, *Conn, int) {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Add(fds[0], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		unix.Close(fds[1])
		p.Shutdown()
		select {
		case <-p.Done():
		case <-time.After(5 * time.Second):
			t.Error("poller did not stop after Shutdown and its last Close")
		}
	})
	return p, c, fds[1]
}

func TestReadWrite(t *testing.T) {
	_, c, peer := pair(t)
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 100)
		n, err := c.Read(b) // waits: nothing sent yet
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b[:n])
	}()
	time.Sleep(20 * time.Millisecond)
	if _, err := unix.Write(peer, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("read %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Read was not woken by input")
	}
	if n, err := c.Write([]byte("world")); n != 5 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	b := make([]byte, 10)
	n, err := unix.Read(peer, b)
	if err != nil || string(b[:n]) != "world" {
		t.Fatalf("peer read %q, %v", b[:n], err)
	}
	unix.Shutdown(peer, unix.SHUT_WR)
	if _, err := c.Read(b); err != io.EOF {
		t.Fatalf("Read after the peer's shutdown: %v, want EOF", err)
	}
}

// outputWatched reports whether fd is watched for output in the poller's
// epoll set, from /proc/self/fdinfo.
func outputWatched(t *testing.T, p *Poller, fd int) bool {
	t.Helper()
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", p.epfd))
	if err != nil {
		t.Skipf("no fdinfo: %v", err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		var tfd int
		var events uint32
		if n, _ := fmt.Sscanf(line, "tfd: %d events: %x", &tfd, &events); n == 2 && tfd == fd {
			return events&unix.EPOLLOUT != 0
		}
	}
	t.Fatalf("fd %d not in the epoll set:\n%s", fd, info)
	return false
}

func TestWriteWaitsForRoomAndStopsWatching(t *testing.T) {
	p, c, peer := pair(t)
	if outputWatched(t, p, c.fd) {
		t.Fatal("output watched before any write waited")
	}
	big := bytes.Repeat([]byte("x"), 4<<20) // far more than a socket buffer
	done := make(chan error, 1)
	go func() {
		n, err := c.Write(big)
		if err == nil && n != len(big) {
			err = fmt.Errorf("wrote %d of %d", n, len(big))
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Write of 4 MiB returned (%v) while the peer read nothing", err)
	default:
	}
	if !outputWatched(t, p, c.fd) {
		t.Error("a waiting Write does not watch for room")
	}
	buf := make([]byte, 64<<10)
	total := 0
	for total < len(big) {
		n, err := unix.Read(peer, buf)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if outputWatched(t, p, c.fd) {
		t.Error("output still watched after the Write finished")
	}
}

func TestWriteDeadline(t *testing.T) {
	_, c, _ := pair(t)
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Write(bytes.Repeat([]byte("x"), 4<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past its deadline: %v", err)
	}
	if err := c.SetReadDeadline(time.Now()); err == nil {
		t.Error("a read deadline was accepted")
	}
}

func TestCloseWakesReaderAndWriter(t *testing.T) {
	_, c, _ := pair(t)
	errs := make(chan error, 2)
	go func() {
		_, err := c.Read(make([]byte, 10))
		errs <- err
	}()
	go func() {
		_, err := c.Write(bytes.Repeat([]byte("x"), 4<<20))
		errs <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked call returned %v, want net.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not wake a blocked call")
		}
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
	if err := c.Close(); err == nil {
		t.Error("second Close succeeded")
	}
}

func TestRawConn(t *testing.T) {
	_, c, peer := pair(t)
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	go func() {
		time.Sleep(20 * time.Millisecond)
		unix.Write(peer, []byte("raw"))
	}()
	buf := make([]byte, 10)
	err = rc.Read(func(fd uintptr) bool {
		var rerr error
		n, rerr = unix.Read(int(fd), buf)
		return rerr != unix.EAGAIN
	})
	if err != nil || string(buf[:n]) != "raw" {
		t.Fatalf("RawConn.Read: %q, %v", buf[:n], err)
	}
	err = rc.Write(func(fd uintptr) bool {
		unix.Write(int(fd), []byte("back"))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	n, _ = unix.Read(peer, buf)
	if string(buf[:n]) != "back" {
		t.Fatalf("peer read %q", buf[:n])
	}
}

func TestListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(ul)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	for i := range 3 {
		nc, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("echo %d", i)
		nc.Write([]byte(msg))
		b := make([]byte, 20)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := nc.Read(b)
		if err != nil || string(b[:n]) != msg {
			t.Fatalf("echo: %q, %v", b[:n], err)
		}
		nc.Close()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	select {
	case <-l.p.Done():
	case <-time.After(5 * time.Second):
		t.Error("the listener's poller did not stop once it and its connections were closed")
	}
}
