package ovsdbbench

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// frames splits stream into the values the framer finds, feeding it
// chunk bytes at a time as a socket would.
func frames(stream []byte, chunk int) ([]string, error) {
	var f framer
	var buf []byte
	var out []string
	for len(stream) > 0 || len(buf) > 0 {
		n := min(chunk, len(stream))
		buf = append(buf, stream[:n]...)
		stream = stream[n:]
		for {
			end, err := f.next(buf)
			if err != nil {
				return out, err
			}
			if end == 0 {
				break
			}
			out = append(out, string(bytes.TrimSpace(buf[:end])))
			buf = buf[:copy(buf, buf[end:])]
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}

func TestFramer(t *testing.T) {
	stream := []byte(`{"id":null,"method":"update2","params":["fan",{"Fan":{"u":{"modify":{"seq":1}}}}]}` +
		"\n" + `{"id":1,"result":"a \"}]\" b","error":null}` + `[1,[2,{"x":"\\"}]]`)
	want := []string{
		`{"id":null,"method":"update2","params":["fan",{"Fan":{"u":{"modify":{"seq":1}}}}]}`,
		`{"id":1,"result":"a \"}]\" b","error":null}`,
		`[1,[2,{"x":"\\"}]]`,
	}
	for _, chunk := range []int{1, 2, 7, 64, len(stream)} {
		got, err := frames(stream, chunk)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if len(got) != len(want) {
			t.Fatalf("chunk %d: got %q", chunk, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("chunk %d, value %d: got %s, want %s", chunk, i, got[i], want[i])
			}
		}
	}
	if _, err := frames([]byte(`{"a":1}}`), 3); err == nil {
		t.Error("an unbalanced closing bracket was accepted")
	}
}

func TestMethodOf(t *testing.T) {
	for msg, want := range map[string]string{
		`{"id":null,"method":"update2","params":[]}`: "update2",
		`{"method": "echo","params":[],"id":"x"}`:    "echo",
		`{"id":1,"result":{},"error":null}`:          "",
		`{"method":7}`:                               "",
		`{"method":"unterminated`:                    "",
	} {
		if got := string(methodOf([]byte(msg))); got != want {
			t.Errorf("methodOf(%s) = %q, want %q", msg, got, want)
		}
	}
}

// FuzzFramer checks that the framer finds the same values whatever the
// chunking and never fails on input, or panics.
func FuzzFramer(f *testing.F) {
	f.Add([]byte(`{"a":"}"}[1,2]`), 3)
	f.Add([]byte(`{"x":"\\\""}`), 1)
	f.Fuzz(func(t *testing.T, stream []byte, chunk int) {
		chunk = 1 + (chunk&0xff)%64
		whole, errWhole := frames(stream, len(stream)+1)
		split, errSplit := frames(stream, chunk)
		if (errWhole == nil) != (errSplit == nil) || len(whole) != len(split) {
			t.Fatalf("whole: %q %v; in chunks of %d: %q %v", whole, errWhole, chunk, split, errSplit)
		}
		for i := range whole {
			if whole[i] != split[i] {
				t.Fatalf("value %d: %q vs %q", i, whole[i], split[i])
			}
		}
	})
}

// TestFanReaderArrivals checks that the reader reports one update per
// monitor with the time its socket became readable, waits for every
// monitor before reading, and answers a probe without taking it for an
// update.
func TestFanReaderArrivals(t *testing.T) {
	const n = 5
	var server [n]int
	var conns []*monConn
	for i := range n {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.SetNonblock(fds[1], true); err != nil {
			t.Fatal(err)
		}
		server[i] = fds[0]
		t.Cleanup(func() { unix.Close(fds[0]) })
		conns = append(conns, &monConn{fd: fds[1]})
	}
	got := make(chan time.Time, 2*n)
	r, err := newFanReader(conns, func(at time.Time) { got <- at })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	update := []byte(`{"id":null,"method":"update2","params":["fan",{"Fan":{}}]}`)
	var sent [n]time.Time
	for i := 1; i < n; i++ {
		sent[i] = time.Now()
		if err := writeAll(server[i], update); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The reader reads only once every monitor has something, at least
	// quiet after the last send; a reported time that late is the read's,
	// not the arrival's. The margin below (quiet/2) is what a loaded
	// machine may add to noticing an arrival (11 ms seen in CI).
	const quiet = 200 * time.Millisecond
	select {
	case at := <-got:
		t.Fatalf("an update was reported (at %v) before every monitor had something", at)
	case <-time.After(quiet):
	}
	var ats []time.Time
	wait := func(k int) {
		t.Helper()
		for range k {
			select {
			case at := <-got:
				ats = append(ats, at)
			case <-time.After(5 * time.Second):
				t.Fatalf("only %d of %d updates reported; reader error: %v", len(ats), n, r.Err())
			}
		}
	}
	// Monitor 0 hears a probe: every socket is readable, so the reader
	// reads them, reports the updates, answers the probe, and waits for
	// monitor 0's update.
	if err := writeAll(server[0], []byte(`{"id":"p","method":"echo","params":[]}`)); err != nil {
		t.Fatal(err)
	}
	wait(n - 1)
	if err := unix.SetNonblock(server[0], false); err != nil {
		t.Fatal(err)
	}
	answer := make([]byte, 256)
	k, err := unix.Read(server[0], answer)
	if err != nil || !bytes.Contains(answer[:k], []byte(`"id":"p"`)) {
		t.Fatalf("probe answer %q, %v", answer[:k], err)
	}
	// Half an update first: the monitor has it only when the rest comes.
	if err := writeAll(server[0], update[:10]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	sent[0] = time.Now()
	if err := writeAll(server[0], update[10:]); err != nil {
		t.Fatal(err)
	}
	wait(1)
	for i := 1; i < n; i++ {
		if ats[i-1].After(ats[i]) {
			t.Errorf("arrivals not in order: %v", ats)
		}
		if ats[i-1].Before(sent[i]) {
			t.Errorf("update %d reported at %v, before it was sent at %v", i, ats[i-1], sent[i])
		}
		if ats[i-1].Sub(sent[i]) > quiet/2+sent[n-1].Sub(sent[1]) {
			t.Errorf("update %d reported %v after it was sent: the time it was read, not when it arrived", i, ats[i-1].Sub(sent[i]))
		}
	}
	if last := ats[n-1]; last.Before(sent[0]) {
		t.Errorf("monitor 0's update reported at %v, before its second half was sent at %v", last, sent[0])
	}
}
