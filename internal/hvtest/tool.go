package hvtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// toolEnv marks a test binary re-executed inside a VM to run a tool.
const toolEnv = "GOVN_HVTEST_TOOL"

// RunToolIfAsked runs a VM tool and exits if this process is a test binary
// that a VM helper re-executed; otherwise it returns at once. Call it first
// thing in TestMain of every package that uses VM.HTTPServe, VM.Curl or
// VM.DHCP.
func RunToolIfAsked() {
	if os.Getenv(toolEnv) == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := runTool(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runTool runs one tool:
//
//	http-serve ADDR BODY   answer every HTTP request with BODY and a newline,
//	                       except GET /ip: the client's address, and GET
//	                       /peer: BODY, a space and the client's address
//	http-get URL           one GET on a new connection; print the body
//	dhcp4 DEV              get a DHCPv4 lease on DEV; print "ADDR/BITS ROUTER"
//	                       (ROUTER "-" if none); configures nothing
func runTool(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("hvtest tool: none named")
	}
	need := func(n int) error {
		if len(args)-1 != n {
			return fmt.Errorf("hvtest tool %s: want %d arguments, have %d", args[0], n, len(args)-1)
		}
		return nil
	}
	switch args[0] {
	case "http-serve":
		if err := need(2); err != nil {
			return err
		}
		return httpServe(ctx, args[1], args[2])
	case "http-get":
		if err := need(1); err != nil {
			return err
		}
		return httpGet(ctx, args[1], out)
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
	return fmt.Errorf("hvtest tool: unknown %q", args[0])
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
