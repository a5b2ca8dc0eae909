// Package traffic holds the small traffic tools that system tests and
// benchmarks run inside network namespaces: ping, a TCP sender and sink
// that verify what they moved, an HTTP server for ab, and a UDP blaster and
// counter. Tests and the bench re-execute their own binary inside a
// namespace (ip netns exec NS BINARY ...) and dispatch to Main.
package traffic

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Main runs the tool named by args[0] with the remaining arguments:
//
//	ping DST COUNT               ICMP echo; fails unless every echo is answered
//	tcp-sink ADDR                accept connections; reply with length and SHA-256
//	tcp-send ADDR BYTES          send BYTES random bytes; check the sink's reply;
//	                             print {"bytes":N,"seconds":S} on stdout
//	tcp-count-sink ADDR          accept connections; reply with the byte count only
//	tcp-stream ADDR SECONDS      send zeros to a tcp-count-sink for SECONDS; check
//	                             the count; print {"bytes":N,"seconds":S}
//	http-server ADDR             answer every request with a short body
//	udp-sink ADDR SECONDS        count datagrams for SECONDS after the first (then
//	                             drain until 300 ms pass without one);
//	                             print {"packets":N,"seconds":S}
//	udp-blast DST SECONDS SIZE   send SIZE-byte datagrams as fast as possible;
//	                             print {"packets":N,"seconds":S}
func Main(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("traffic: no tool named")
	}
	tool, a := args[0], args[1:]
	need := func(n int) error {
		if len(a) != n {
			return fmt.Errorf("traffic %s: want %d arguments, have %d", tool, n, len(a))
		}
		return nil
	}
	switch tool {
	case "ping":
		if err := need(2); err != nil {
			return err
		}
		n, err := strconv.Atoi(a[1])
		if err != nil {
			return fmt.Errorf("traffic ping: count: %w", err)
		}
		return Ping(a[0], n, 3*time.Second) // generous: CI machines are busy
	case "tcp-sink":
		if err := need(1); err != nil {
			return err
		}
		return TCPSink(ctx, a[0])
	case "tcp-send":
		if err := need(2); err != nil {
			return err
		}
		n, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return fmt.Errorf("traffic tcp-send: bytes: %w", err)
		}
		r, err := TCPSend(a[0], n)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	case "tcp-count-sink":
		if err := need(1); err != nil {
			return err
		}
		return TCPCountSink(ctx, a[0])
	case "tcp-stream":
		if err := need(2); err != nil {
			return err
		}
		secs, err := strconv.ParseFloat(a[1], 64)
		if err != nil {
			return fmt.Errorf("traffic tcp-stream: seconds: %w", err)
		}
		r, err := TCPStream(a[0], time.Duration(secs*float64(time.Second)))
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	case "http-server":
		if err := need(1); err != nil {
			return err
		}
		return HTTPServer(ctx, a[0])
	case "udp-sink", "udp-blast":
		if tool == "udp-sink" {
			if err := need(2); err != nil {
				return err
			}
		} else if err := need(3); err != nil {
			return err
		}
		secs, err := strconv.ParseFloat(a[1], 64)
		if err != nil {
			return fmt.Errorf("traffic %s: seconds: %w", tool, err)
		}
		d := time.Duration(secs * float64(time.Second))
		var r Result
		if tool == "udp-sink" {
			r, err = UDPSink(ctx, a[0], d)
		} else {
			size, perr := strconv.Atoi(a[2])
			if perr != nil {
				return fmt.Errorf("traffic udp-blast: size: %w", perr)
			}
			r, err = UDPBlast(a[0], d, size)
		}
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	return fmt.Errorf("traffic: unknown tool %q", tool)
}

// Result is what a measuring tool moved and in how long.
type Result struct {
	Packets int64   `json:"packets,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Ping sends count ICMP echo requests to dst, one at a time, and fails if
// any goes unanswered within timeout.
func Ping(dst string, count int, timeout time.Duration) error {
	c, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	defer c.Close()
	addr, err := net.ResolveIPAddr("ip4", dst)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	id := uint16(os.Getpid())
	buf := make([]byte, 1500)
	for seq := 1; seq <= count; seq++ {
		req := make([]byte, 8+32)
		req[0] = 8 // echo request
		binary.BigEndian.PutUint16(req[4:], id)
		binary.BigEndian.PutUint16(req[6:], uint16(seq))
		copy(req[8:], "govn datapath system test ping..")
		binary.BigEndian.PutUint16(req[2:], ^sum16(req))
		if _, err := c.WriteTo(req, addr); err != nil {
			return fmt.Errorf("ping %s: %w", dst, err)
		}
		deadline := time.Now().Add(timeout)
		for {
			_ = c.SetReadDeadline(deadline)
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return fmt.Errorf("ping %s: echo %d: %w", dst, seq, err)
			}
			r := buf[:n]
			if n >= 8 && r[0] == 0 && binary.BigEndian.Uint16(r[4:]) == id &&
				binary.BigEndian.Uint16(r[6:]) == uint16(seq) && from.String() == addr.String() {
				break
			}
		}
	}
	return nil
}

func sum16(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// TCPSink accepts connections on addr until ctx ends; for each it reads to
// EOF and answers with the byte count (8 bytes) and the SHA-256 of the data.
func TCPSink(ctx context.Context, addr string) error {
	return acceptTCP(ctx, "tcp-sink", addr, func(c net.Conn) {
		h := sha256.New()
		n, err := io.Copy(h, c)
		if err != nil {
			return
		}
		var reply [8 + sha256.Size]byte
		binary.BigEndian.PutUint64(reply[:], uint64(n))
		copy(reply[8:], h.Sum(nil))
		_, _ = c.Write(reply[:])
	})
}

// acceptTCP listens on addr and serves each connection with handle in its
// own goroutine, closing the connection afterwards, until ctx ends.
func acceptTCP(ctx context.Context, tool, addr string, handle func(net.Conn)) error {
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	go func() { <-ctx.Done(); l.Close() }()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", tool, err)
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

// TCPSend connects to a TCPSink at addr, sends n random bytes and checks
// that the sink saw exactly those bytes.
func TCPSend(addr string, n int64) (Result, error) {
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return Result{}, fmt.Errorf("tcp-send: %w", err)
	}
	defer c.Close()
	start := time.Now()
	h := sha256.New()
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	buf := make([]byte, 64<<10)
	for left := n; left > 0; {
		b := buf[:min(int64(len(buf)), left)]
		_, _ = rng.Read(b)
		h.Write(b)
		if _, err := c.Write(b); err != nil {
			return Result{}, fmt.Errorf("tcp-send: after %d bytes: %w", n-left, err)
		}
		left -= int64(len(b))
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return Result{}, fmt.Errorf("tcp-send: %w", err)
	}
	var reply [8 + sha256.Size]byte
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		return Result{}, fmt.Errorf("tcp-send: reading the sink's reply: %w", err)
	}
	secs := time.Since(start).Seconds()
	if got := int64(binary.BigEndian.Uint64(reply[:])); got != n {
		return Result{}, fmt.Errorf("tcp-send: sink received %d bytes, sent %d", got, n)
	}
	if string(reply[8:]) != string(h.Sum(nil)) {
		return Result{}, errors.New("tcp-send: sink's SHA-256 differs from what was sent")
	}
	return Result{Bytes: n, Seconds: secs}, nil
}

// TCPCountSink accepts connections on addr until ctx ends; for each it
// reads to EOF and answers with the byte count (8 bytes). It does no more
// work per byte than a copy, for throughput measurements.
func TCPCountSink(ctx context.Context, addr string) error {
	return acceptTCP(ctx, "tcp-count-sink", addr, func(c net.Conn) {
		n, err := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
		if err != nil {
			return
		}
		var reply [8]byte
		binary.BigEndian.PutUint64(reply[:], uint64(n))
		_, _ = c.Write(reply[:])
	})
}

// TCPStream sends zeros to a TCPCountSink at addr for d and checks that
// the sink counted every byte. Seconds runs until the sink's answer, so
// bytes still in flight at the deadline are counted in the time.
func TCPStream(addr string, d time.Duration) (Result, error) {
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return Result{}, fmt.Errorf("tcp-stream: %w", err)
	}
	defer c.Close()
	buf := make([]byte, 256<<10)
	start := time.Now()
	end := start.Add(d)
	var n int64
	for time.Now().Before(end) {
		m, err := c.Write(buf)
		n += int64(m)
		if err != nil {
			return Result{}, fmt.Errorf("tcp-stream: after %d bytes: %w", n, err)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return Result{}, fmt.Errorf("tcp-stream: %w", err)
	}
	var reply [8]byte
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		return Result{}, fmt.Errorf("tcp-stream: reading the sink's count: %w", err)
	}
	secs := time.Since(start).Seconds()
	if got := int64(binary.BigEndian.Uint64(reply[:])); got != n {
		return Result{}, fmt.Errorf("tcp-stream: sink counted %d bytes, sent %d", got, n)
	}
	return Result{Bytes: n, Seconds: secs}, nil
}

// HTTPServer answers every request on addr with a short text until ctx ends.
func HTTPServer(ctx context.Context, addr string) error {
	srv := &http.Server{
		Addr: addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "hello from the far side of the govn datapath\n")
		}),
	}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http-server: %w", err)
	}
	return nil
}

// Listening reports whether process pid, once inside a network namespace
// other than the caller's, has a socket of network ("tcp" or "udp")
// listening on port. A tool started with ip netns exec keeps its pid, so
// this tells when a server tool is ready without a fixed sleep.
func Listening(pid int, network string, port uint16) bool {
	ours, err1 := os.Readlink("/proc/self/ns/net")
	theirs, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err1 != nil || err2 != nil || ours == theirs {
		return false
	}
	// Socket states as /proc/net/{tcp,udp} print them.
	const tcpListen, udpUnconnected = "0A", "07"
	state := tcpListen
	if network == "udp" {
		state = udpUnconnected
	}
	table, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, network))
	if err != nil {
		return false
	}
	// Lines read "sl local_address rem_address st ...", the local address
	// as hex IP:PORT.
	suffix := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], suffix) && f[3] == state {
			return true
		}
	}
	return false
}
