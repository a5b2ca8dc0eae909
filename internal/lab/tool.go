package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/datapath/systest/traffic"
)

// ErrToolUsage is wrapped by RunTool's errors about its arguments.
var ErrToolUsage = errors.New("lab tool usage")

// RunTool runs one of lab's tools, for Tool to run inside a namespace:
//
//	http-serve ADDR BODY   answer every HTTP request with BODY and a newline,
//	                       except GET /ip: the client's address, and GET
//	                       /peer: BODY, a space and the client's address
//	http-get URL           one GET on a new connection; print the body
//	udp-serve ADDR BODY    answer every UDP datagram with BODY
//	dhcp4 DEV              get a DHCPv4 lease on DEV; print "ADDR/BITS ROUTER
//	                       DNS MTU" (ROUTER, DNS "-" and MTU 0 if none);
//	                       configures nothing
//	miss-flood DEV RATE DURATION ROUTERMAC PREFIX
//	                       send RATE UDP datagrams a second from DEV to
//	                       ROUTERMAC, each to the next address of PREFIX
//	                       (ARP misses at the router), for DURATION (0:
//	                       until stopped); print "sent N refused M"
//
// A tool not named, unknown or with the wrong number of arguments is an
// error that wraps ErrToolUsage.
func RunTool(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no tool named", ErrToolUsage)
	}
	need := func(n int) error {
		if len(args)-1 != n {
			return fmt.Errorf("%w: %s wants %d arguments, has %d", ErrToolUsage, args[0], n, len(args)-1)
		}
		return nil
	}
	switch args[0] {
	case "http-serve":
		if err := need(2); err != nil {
			return err
		}
		return httpServe(ctx, args[1], args[2])
	case "udp-serve":
		if err := need(2); err != nil {
			return err
		}
		return udpServe(ctx, args[1], args[2])
	case "http-get":
		if err := need(1); err != nil {
			return err
		}
		return httpGet(ctx, args[1], out)
	case "miss-flood":
		if err := need(5); err != nil {
			return err
		}
		rate, err := strconv.Atoi(args[2])
		if err != nil || rate <= 0 {
			return fmt.Errorf("%w: miss-flood: rate %q: want a positive number", ErrToolUsage, args[2])
		}
		d, err := time.ParseDuration(args[3])
		if err != nil || d < 0 {
			return fmt.Errorf("%w: miss-flood: duration %q: want a duration, 0 for until stopped", ErrToolUsage, args[3])
		}
		rmac, err := net.ParseMAC(args[4])
		if err != nil {
			return fmt.Errorf("%w: miss-flood: router MAC: %v", ErrToolUsage, err)
		}
		prefix, err := netip.ParsePrefix(args[5])
		if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 30 {
			return fmt.Errorf("%w: miss-flood: prefix %q: want an IPv4 prefix of /30 or wider", ErrToolUsage, args[5])
		}
		sent, refused, err := missFlood(ctx, args[1], rate, d, rmac, prefix)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "sent %d refused %d\n", sent, refused)
		return err
	case "dhcp4":
		if err := need(1); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		l, err := dhcp4(ctx, args[1])
		if err != nil {
			return err
		}
		router, dns := "-", "-"
		if l.Router.IsValid() {
			router = l.Router.String()
		}
		if l.DNS.IsValid() {
			dns = l.DNS.String()
		}
		_, err = fmt.Fprintln(out, l.Addr, router, dns, l.MTU)
		return err
	}
	return fmt.Errorf("%w: unknown tool %q", ErrToolUsage, args[0])
}

func httpServe(ctx context.Context, addr, body string) error {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return fmt.Errorf("http-serve: %w", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Close every connection: a load balancer picks a backend
			// per connection, and each request should be a new pick.
			w.Header().Set("Connection", "close")
			// Who the client seems to be, to see NAT at work.
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			switch r.URL.Path {
			case "/ip":
				fmt.Fprintln(w, host)
			case "/peer":
				// Which backend saw whom, for NAT behind a load balancer.
				fmt.Fprintln(w, body, host)
			default:
				fmt.Fprintln(w, body)
			}
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http-serve: %w", err)
	}
	return nil
}

func udpServe(ctx context.Context, addr, body string) error {
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return fmt.Errorf("udp-serve: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = c.Close()
	}()
	buf := make([]byte, 65536)
	for {
		_, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("udp-serve: %w", err)
		}
		_, _ = c.WriteTo([]byte(body), from) // a lost answer is the client's to retry
	}
}

func httpGet(ctx context.Context, url string, out io.Writer) error {
	client := &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
		Timeout:   5 * time.Second,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("http-get: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("http-get: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("http-get %s: %s", url, resp.Status)
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return fmt.Errorf("http-get %s: %w", url, err)
	}
	return nil
}

// Tool is how to run RunTool inside a namespace: a program that calls
// RunTool with its arguments. Argv is the program and its leading
// arguments (a test binary that checks Env; `govn lab-tool`), Env what it
// needs in its environment.
type Tool struct {
	Argv []string
	Env  []string
}

// Command returns the command that runs the tool args inside ns.
func (tl Tool) Command(ctx context.Context, ns string, args ...string) *exec.Cmd {
	argv := InNS(ns, append(append([]string{}, tl.Argv...), args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), tl.Env...)
	return cmd
}

// HTTPServe starts an HTTP server on port of every address inside ns, as
// a daemon in dir (see Start); every response's body is body and a
// newline, except for path /ip, which answers the client's address as the
// server sees it (to check NAT). It returns once the server listens.
func (tl Tool) HTTPServe(cl Cleaner, dir, ns, name string, port uint16, body string) (*Daemon, error) {
	return tl.serve(cl, dir, ns, name, "tcp", port, "http-serve", body)
}

// UDPServe starts udp-serve on port inside ns, answering with body, and
// returns once it listens.
func (tl Tool) UDPServe(cl Cleaner, dir, ns, name string, port uint16, body string) (*Daemon, error) {
	return tl.serve(cl, dir, ns, name, "udp", port, "udp-serve", body)
}

func (tl Tool) serve(cl Cleaner, dir, ns, name, network string, port uint16, tool, body string) (*Daemon, error) {
	args := append(append([]string{}, tl.Argv...), tool, fmt.Sprintf("0.0.0.0:%d", port), body)
	d, err := Start(cl, dir, ns, name, tl.Env, args...)
	if err != nil {
		return nil, err
	}
	if err := WaitFor(20*time.Second, name+": "+tool+" on port "+strconv.Itoa(int(port)), func() bool {
		if done, _ := d.Exited(); done {
			return true
		}
		return traffic.Listening(d.Pid(), network, port)
	}); err != nil {
		return nil, err
	}
	if done, err := d.Exited(); done {
		return nil, fmt.Errorf("%s: %s ended (%v): %s", name, tool, err, Tail(d.Log, 5))
	}
	return d, nil
}

// Curl makes one HTTP GET from inside ns on a new connection and returns
// the body; it gives up after 5 s.
func (tl Tool) Curl(ns, url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := tl.Command(ctx, ns, "http-get", url).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("GET %s in %s: %v: %s", url, ns, err, stderr)
	}
	return string(out), nil
}

// Lease is what a DHCP server granted.
type Lease struct {
	Addr   netip.Prefix
	Router string // "" if none
	DNS    string // the first DNS server, "" if none
	MTU    int    // 0 if none
}

// DHCP gets an IPv4 lease for dev inside ns by DHCP and returns it; it
// configures nothing.
func (tl Tool) DHCP(ns, dev string) (Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tl.Command(ctx, ns, "dhcp4", dev).CombinedOutput()
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp on %s in %s: %v: %s", dev, ns, err, strings.TrimSpace(string(out)))
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		return Lease{}, fmt.Errorf("dhcp on %s in %s: unexpected output %q", dev, ns, out)
	}
	p, err := netip.ParsePrefix(f[0])
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp on %s in %s: %w", dev, ns, err)
	}
	l := Lease{Addr: p, Router: strings.TrimPrefix(f[1], "-"), DNS: strings.TrimPrefix(f[2], "-")}
	if l.MTU, err = strconv.Atoi(f[3]); err != nil {
		return Lease{}, fmt.Errorf("dhcp on %s in %s: MTU %q: %w", dev, ns, f[3], err)
	}
	return l, nil
}
