// Package metrics serves the counters of govn's daemons (govn db, govn
// northd, govn chassis) to Prometheus over HTTP (--metrics=ADDR).
//
// The daemons' packages keep their own counters, as they do for their
// control-socket commands (inc-engine/show-stats, memory/show,
// dpctl/show); the collectors here read those counters when Prometheus
// scrapes, so counting costs the packet path and the engines nothing more
// than it did, and no daemon package imports the Prometheus client.
// Latencies that are events, not counters (a Northbound change reaching
// the Southbound, a Southbound change programmed on a chassis), are
// observed into histograms through the daemons' hooks.
//
// Metric names start with govn_ and the component: govn_db_*,
// govn_northd_*, govn_chassis_*, govn_datapath_*, govn_conntrack_*,
// govn_port_*, govn_pinctrl_*.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime's and the
// process's collectors, to which a daemon adds its own.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Server is a running metrics endpoint.
type Server struct {
	addr net.Addr
	done chan error
}

// Addr is the address the endpoint listens on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.addr }

// Done yields the serving error (nil after a clean shutdown) once the
// endpoint has stopped.
func (s *Server) Done() <-chan error { return s.done }

// Serve listens on addr (host:port; ":9476" for every address) and serves
// reg's metrics at /metrics until ctx ends. It returns once listening, so
// that a daemon refuses to start on an address it cannot use.
func Serve(ctx context.Context, addr string, reg prometheus.Gatherer, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{log}}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "govn: metrics at /metrics")
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s := &Server{addr: l.Addr(), done: make(chan error, 1)}
	go func() {
		err := hs.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := hs.Shutdown(shut); err != nil {
			hs.Close()
		}
	}()
	log.Info("serving metrics", "addr", l.Addr().String())
	return s, nil
}

// slogPrinter is promhttp's error log written to slog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "err", fmt.Sprint(v...)) }

// latencyBuckets cover 100 µs to about 26 s: a change is applied in
// milliseconds when it is incremental and in seconds when it recomputes.
var latencyBuckets = prometheus.ExponentialBuckets(100e-6, 2, 19)

// collector is a prometheus.Collector from a describe list and a collect
// function: the collectors here are all "read the counters on scrape".
type collector struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// descs builds Descs and remembers them for Describe.
type descs []*prometheus.Desc

func (ds *descs) add(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	*ds = append(*ds, d)
	return d
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func seconds(ch chan<- prometheus.Metric, d *prometheus.Desc, v time.Duration, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v.Seconds(), labels...)
}
