// Package procstat reads what the benches measure of a process they
// started, from Linux's /proc: its resident memory and the CPU time of
// all its threads.
package procstat

import (
	"bufio"
	"errors"
	"fmt"
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
