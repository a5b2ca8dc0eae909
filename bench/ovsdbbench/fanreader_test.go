package ovsdbbench

import (
	"bytes"
	"testing"
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
