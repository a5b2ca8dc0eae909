package ovsdbbench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// syncLatency appends n records of size bytes to a new file in dir, each
// followed by fdatasync, and returns the median time of one append and
// sync: a floor under the latency of any transaction acknowledged only
// once it is on this disk, whatever the server.
func syncLatency(dir string, n, size int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "sync-probe-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = 'x'
	}
	rec[size-1] = '\n'
	times := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := f.Write(rec); err != nil {
			return 0, fmt.Errorf("write %s: %w", filepath.Base(f.Name()), err)
		}
		for {
			err = unix.Fdatasync(int(f.Fd()))
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return 0, fmt.Errorf("fdatasync %s: %w", filepath.Base(f.Name()), err)
		}
		times = append(times, time.Since(start))
	}
	return percentile(times, 50), nil
}
