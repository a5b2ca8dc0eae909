package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/govn/govn/internal/metrics"
)

// metricsUsage is the --metrics flag's help, the same for every daemon.
const metricsUsage = "serve Prometheus metrics at http://`ADDR`/metrics (host:port; :9476 for every address)"

// startMetrics serves a registry with the Go runtime's and the process's
// collectors and those register adds, on addr until ctx ends; with addr
// "" it does nothing.
func startMetrics(ctx context.Context, addr string, logger *slog.Logger, register func(reg *prometheus.Registry)) error {
	if addr == "" {
		return nil
	}
	reg := metrics.NewRegistry()
	register(reg)
	_, err := metrics.Serve(ctx, addr, reg, logger)
	return err
}
