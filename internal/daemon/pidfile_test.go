package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// pidfileHelperEnv makes the test binary a process that holds the pidfile
// the variable names until its standard input closes. It prints "held" once
// it holds it, or the error CreatePidfile returned. Traditional fcntl locks
// never conflict inside one process, so every holder is its own process.
const pidfileHelperEnv = "GOVN_PIDFILE_TEST_HOLD"

// overwriteHelperEnv set to 1 makes the holder pass overwrite.
const overwriteHelperEnv = "GOVN_PIDFILE_TEST_OVERWRITE"

func holdPidfile(path string) int {
	p, err := CreatePidfile(path, os.Getenv(overwriteHelperEnv) == "1")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	if err := p.Remove(); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// holder is a helper process holding (or failing to take) a pidfile.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	line  string // its first line of output
}

// startHolder starts a helper on path and waits for its first line.
func startHolder(t *testing.T, path string, overwrite bool) *holder {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), pidfileHelperEnv+"="+path)
	if overwrite {
		cmd.Env = append(cmd.Env, overwriteHelperEnv+"=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("pidfile holder: %v", err)
	}
	h.line = strings.TrimSpace(line)
	return h
}

// stop closes the holder's input, so that it removes its pidfile, and
// waits for it.
func (h *holder) stop(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Errorf("pidfile holder: %v", err)
	}
}

func TestPidfileRefusesSecondDaemon(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.pid")
	first := startHolder(t, path, false)
	if first.line != "held" {
		t.Fatalf("first daemon: %s", first.line)
	}
	pid, err := ReadPidfile(path)
	if err != nil || pid != first.cmd.Process.Pid {
		t.Fatalf("ReadPidfile = %d, %v; want %d", pid, err, first.cmd.Process.Pid)
	}
	second := startHolder(t, path, false)
	want := fmt.Sprintf("%s: already running as pid %d, aborting", path, first.cmd.Process.Pid)
	if second.line != want {
		t.Errorf("second daemon said %q, want %q", second.line, want)
	}
	if err := second.cmd.Wait(); err == nil {
		t.Error("second daemon exited 0")
	}
	// The refused daemon left the first one's pidfile alone.
	if pid, err := ReadPidfile(path); err != nil || pid != first.cmd.Process.Pid {
		t.Errorf("after the refusal ReadPidfile = %d, %v; want %d", pid, err, first.cmd.Process.Pid)
	}
	first.stop(t)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile after a clean exit: %v", err)
	}
	matches, _ := filepath.Glob(path + ".tmp*")
	if len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestPidfileTakesOverStale(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		stale func(t *testing.T, path string)
	}{
		{"killed daemon", func(t *testing.T, path string) {
			h := startHolder(t, path, false)
			if h.line != "held" {
				t.Fatal(h.line)
			}
			h.cmd.Process.Signal(syscall.SIGKILL)
			h.cmd.Wait()
		}},
		{"unlocked file naming a live process", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("not a pid"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".pid")
			tc.stale(t, path)
			if _, err := ReadPidfile(path); !errors.Is(err, ErrStale) {
				t.Fatalf("ReadPidfile of the stale file: %v, want ErrStale", err)
			}
			h := startHolder(t, path, false)
			if h.line != "held" {
				t.Fatalf("taking over a stale pidfile: %s", h.line)
			}
			if pid, err := ReadPidfile(path); err != nil || pid != h.cmd.Process.Pid {
				t.Errorf("ReadPidfile = %d, %v; want %d", pid, err, h.cmd.Process.Pid)
			}
			h.stop(t)
		})
	}
}

func TestPidfileOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.pid")
	first := startHolder(t, path, false)
	second := startHolder(t, path, true)
	if first.line != "held" || second.line != "held" {
		t.Fatalf("first %q, second with overwrite %q", first.line, second.line)
	}
	if pid, err := ReadPidfile(path); err != nil || pid != second.cmd.Process.Pid {
		t.Errorf("ReadPidfile = %d, %v; want the overwriting pid %d", pid, err, second.cmd.Process.Pid)
	}
	// The overwritten daemon exits first and leaves the file that is no
	// longer its own in place.
	first.stop(t)
	if pid, err := ReadPidfile(path); err != nil || pid != second.cmd.Process.Pid {
		t.Errorf("after the first daemon's exit ReadPidfile = %d, %v; want %d", pid, err, second.cmd.Process.Pid)
	}
	second.stop(t)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile after both exited: %v", err)
	}
}

func TestReadPidfileMissing(t *testing.T) {
	_, err := ReadPidfile(filepath.Join(t.TempDir(), "none.pid"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadPidfile of a missing file: %v", err)
	}
}

// TestPidfileRemoveTwice checks Remove is idempotent and removes.
func TestPidfileRemoveTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.pid")
	p, err := CreatePidfile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Path() != path {
		t.Errorf("Path() = %q", p.Path())
	}
	for range 2 {
		if err := p.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile after Remove: %v", err)
	}
}

func TestParsePID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // 0: an error
	}{
		{"1234\n", 1234},
		{"  42  ", 42},
		{"7", 7},
		{"", 0},
		{"0\n", 0},
		{"-5\n", 0},
		{"+5\n", 0},
		{"12 34\n", 0},
		{"abc", 0},
		{"99999999999999999999999", 0},
	} {
		got, err := parsePID([]byte(tc.in))
		if tc.want == 0 {
			if err == nil {
				t.Errorf("parsePID(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parsePID(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParsePID checks that no pidfile contents crash the parser and that
// what it accepts is a positive id that prints back as the trimmed input.
func FuzzParsePID(f *testing.F) {
	for _, s := range []string{"1234\n", "", "0", "-1", "+1", " 9 ", "1e3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pid, err := parsePID(b)
		if err != nil {
			return
		}
		if pid <= 0 {
			t.Fatalf("%q: pid %d", b, pid)
		}
		if text := strings.TrimSpace(string(b)); strings.TrimLeft(text, "0") != strconv.Itoa(pid) {
			t.Fatalf("%q: pid %d", b, pid)
		}
	})
}
