package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
)

// peakGrowth is how much the live heap must grow past the last profile
// written before another is: a cold start grows the heap through dozens
// of collections, and a profile at each would cost more than it tells.
const peakGrowth = 1.05

// startPeakHeapProfile writes a heap profile (go tool pprof) to path each
// time the live heap, measured at the end of a garbage collection, reaches
// a new peak, so that once the run is over path holds the heap at its
// largest: a peak is transient (a cold start's first transaction), and a
// profile taken at exit or on request would miss it. The profile is
// written to a temporary file and renamed, so path always holds a whole
// one. With path empty it does nothing; the watch ends with ctx.
func startPeakHeapProfile(ctx context.Context, path string, log *slog.Logger) error {
	if path == "" {
		return nil
	}
	// Try the path once now, so that a bad one fails the start.
	if err := writeHeapProfile(path); err != nil {
		return err
	}
	gcs := make(chan struct{}, 1)
	watchGC(ctx, gcs)
	go func() {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var written uint64
		for {
			select {
			case <-ctx.Done():
				return
			case <-gcs:
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				return
			}
			live := sample[0].Value.Uint64()
			if float64(live) < peakGrowth*float64(written) {
				continue
			}
			if err := writeHeapProfile(path); err != nil {
				log.Warn("heap profile", "err", err)
				return
			}
			written = live
			log.Info("heap profile written at a new peak", "path", path, "live_bytes", live)
		}
	}()
	return nil
}

// watchGC sends on gcs (without blocking) after every garbage collection
// until ctx ends: a finalizer runs once its object is found unreachable,
// that is after a collection, and sets itself on a new object each time.
func watchGC(ctx context.Context, gcs chan<- struct{}) {
	type sentinel struct{ _ [16]byte } // not zero-sized: those are never freed
	var arm func(*sentinel)
	arm = func(*sentinel) {
		if ctx.Err() != nil {
			return
		}
		select {
		case gcs <- struct{}{}:
		default:
		}
		runtime.SetFinalizer(new(sentinel), arm)
	}
	runtime.SetFinalizer(new(sentinel), arm)
}

func writeHeapProfile(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("heap profile: %w", err)
	}
	return nil
}
