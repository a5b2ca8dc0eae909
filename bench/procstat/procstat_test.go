package procstat

import (
	"os"
	"strings"
	"testing"
)

// TestSelf reads this test process: it has memory and has used CPU, and
// a process that does not exist is an error.
func TestSelf(t *testing.T) {
	peak, cur, err := Memory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cur <= 0 || peak < cur {
		t.Errorf("peak %d, current %d", peak, cur)
	}
	sum := 0
	for i := range 1_000_000 {
		sum += i
	}
	_ = sum
	cpu, err := CPUTime(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Errorf("CPU time %v, %v", cpu, err)
	}
	if _, _, err := Memory(-1); err == nil {
		t.Error("Memory(-1) succeeded")
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("CPUTime(-1) succeeded")
	}
}

func TestParseSmaps(t *testing.T) {
	const text = `00400000-00c43000 r-xp 00000000 08:01 1234                               /usr/bin/govn
Size:               8460 kB
Rss:                6732 kB
Pss:                6732 kB
19d5a8c00000-19d5ac000000 rw-p 00000000 00:00 0 
Size:              53248 kB
Rss:               29824 kB
7f09c247d000-7f09c267d000 rw-s 00000000 00:08 901789                     socket:[901789]
Rss:                2048 kB
VmFlags: rd wr sh mr mw me ms 
7ffd1b5e0000-7ffd1b601000 rw-p 00000000 00:00 0                          [stack]
Rss:                  12 kB
7ffd1b7d1000-7ffd1b7d3000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   4 kB
7f0000000000-7f0000001000 r--p 00000000 08:01 99                         /tmp/a file with spaces
Rss:                   4 kB
`
	got, err := parseSmaps(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := Resident{Anon: (29824 + 12) << 10, File: (6732 + 4) << 10, Socket: 2048 << 10, Other: 4 << 10}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"Rss: x kB\n", "Rss:\n", "Rss: -4 kB\n", "Rss: 99999999999999999 kB\n"} {
		if _, err := parseSmaps(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	self, err := ResidentByKind(os.Getpid())
	if err != nil || self.Anon <= 0 || self.File <= 0 {
		t.Errorf("this process: %+v, %v", self, err)
	}
}

func FuzzParseSmaps(f *testing.F) {
	f.Add("00400000-00c43000 r-xp 00000000 08:01 1234 /usr/bin/govn\nRss: 6732 kB\n")
	f.Add("7f09c247d000-7f09c267d000 rw-s 00000000 00:08 901789 socket:[901789]\nRss: 2048 kB\n")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseSmaps(strings.NewReader(s))
		if err == nil && (r.Anon < 0 || r.File < 0 || r.Socket < 0 || r.Other < 0) {
			t.Errorf("negative memory %+v from %q", r, s)
		}
	})
}
