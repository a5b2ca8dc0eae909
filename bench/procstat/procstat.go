// Package procstat reads what the benches measure of a process they
// started, from Linux's /proc: its resident memory and the CPU time of
// all its threads.
package procstat

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Memory returns the peak (VmHWM) and current (VmRSS) resident set size
// of process pid, in bytes.
func Memory(pid int) (peak, current int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, perr := strconv.ParseInt(fields[1], 10, 64)
		if perr != nil {
			continue
		}
		switch fields[0] {
		case "VmHWM:":
			peak = kb << 10
		case "VmRSS:":
			current = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("reading /proc/%d/status: %w", pid, err)
	}
	if peak == 0 || current == 0 {
		return 0, 0, errors.New("no VmHWM/VmRSS in /proc status")
	}
	return peak, current, nil
}

// CPUTime returns the CPU time all of process pid's threads have run,
// summed from /proc/PID/task/*/schedstat (nanoseconds, unlike the clock
// ticks of /proc/PID/stat).
func CPUTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for process %d", pid)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that has just exited
		}
		f, _, _ := strings.Cut(string(b), " ")
		ns, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

// Resident is a process's resident memory split by what backs it, in
// bytes, summed over its mappings (/proc/PID/smaps).
type Resident struct {
	// Anon is anonymous memory: the heap, stacks, private mappings.
	Anon int64
	// File is memory mapped from files: the program's text and data,
	// shared libraries.
	File int64
	// Socket is memory mapped from sockets: AF_PACKET rings, which the
	// kernel allocates whole when a ring is set up.
	Socket int64
	// Other is the rest ([vdso], [vvar], device mappings).
	Other int64
}

// Total is the sum of the parts.
func (r Resident) Total() int64 { return r.Anon + r.File + r.Socket + r.Other }

// ResidentByKind reads process pid's resident memory by kind.
func ResidentByKind(pid int) (Resident, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return Resident{}, err
	}
	defer f.Close()
	r, err := parseSmaps(f)
	if err != nil {
		return Resident{}, fmt.Errorf("reading /proc/%d/smaps: %w", pid, err)
	}
	return r, nil
}

// parseSmaps sums the Rss lines of smaps text by the kind of each
// mapping, named on its header line ("start-end perms offset dev inode
// [path]").
func parseSmaps(rd io.Reader) (Resident, error) {
	var r Resident
	kind := &r.Anon
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "Rss:" {
			if len(fields) < 2 {
				return Resident{}, fmt.Errorf("bad Rss line %q", line)
			}
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb < 0 || kb > 1<<40 {
				return Resident{}, fmt.Errorf("bad Rss line %q", line)
			}
			*kind += kb << 10
			continue
		}
		if !strings.Contains(fields[0], "-") || len(fields) < 5 || strings.HasSuffix(fields[0], ":") {
			continue // another field of the current mapping
		}
		path := ""
		if len(fields) >= 6 {
			path = strings.Join(fields[5:], " ")
		}
		switch {
		case path == "" || path == "[heap]" || strings.HasPrefix(path, "[stack") || strings.HasPrefix(path, "[anon"):
			kind = &r.Anon
		case strings.HasPrefix(path, "socket:"):
			kind = &r.Socket
		case strings.HasPrefix(path, "/"):
			kind = &r.File
		default:
			kind = &r.Other
		}
	}
	if err := sc.Err(); err != nil {
		return Resident{}, err
	}
	return r, nil
}
