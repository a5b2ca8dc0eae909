package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink the profile goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPeakHeapProfile checks that a bad path fails the start, that a
// profile is there at once, and that a heap grown by 64 MiB is written
// with a live heap at least that large.
func TestPeakHeapProfile(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := startPeakHeapProfile(t.Context(), filepath.Join(t.TempDir(), "no", "such", "dir"), log); err == nil {
		t.Error("a profile path in a missing directory was taken")
	}

	var logs lockedBuffer
	log = slog.New(slog.NewTextHandler(&logs, nil))
	path := filepath.Join(t.TempDir(), "heap.pprof")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := startPeakHeapProfile(ctx, path, log); err != nil {
		t.Fatal(err)
	}
	checkGzip(t, path)

	// Hold far more than the test binary's heap, so the next collections
	// see a new peak.
	held := make([][]byte, 64)
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	deadline := time.Now().Add(20 * time.Second)
	for maxLive(logs.String()) < 64<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("no profile written at a new peak of the heap; log:\n%s", logs.String())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(held)
	checkGzip(t, path)
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary profile left behind: %v", err)
	}
}

// maxLive is the largest live_bytes of the log's "new peak" records.
func maxLive(log string) uint64 {
	var most uint64
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "new peak") {
			continue
		}
		_, v, ok := strings.Cut(line, "live_bytes=")
		if !ok {
			continue
		}
		v, _, _ = strings.Cut(v, " ")
		if n, err := strconv.ParseUint(v, 10, 64); err == nil && n > most {
			most = n
		}
	}
	return most
}

// checkGzip checks that path holds a whole gzip stream, as a pprof
// profile is.
func checkGzip(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if n, err := io.Copy(io.Discard, z); err != nil || n == 0 {
		t.Fatalf("%s: %d bytes, %v", path, n, err)
	}
}
