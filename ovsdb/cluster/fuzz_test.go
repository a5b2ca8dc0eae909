package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzOpenStore feeds openStore arbitrary file contents: it must refuse
// them or read them (cutting a torn tail) without crashing, and what it
// kept must read back the same after a rewrite.
func FuzzOpenStore(f *testing.F) {
	hdr, _ := encodeRecord(nil, &record{Type: "hdr", Name: "T", SID: "0c5906f4-9889-4a1a-af84-8fdf76a27119", Local: "tcp:127.0.0.1:6641"})
	f.Add(hdr)
	logRec, _ := encodeRecord(hdr, &record{Type: "log", Entries: []entry{{Index: 2, Term: 1, Type: uint8(raft.LogCommand), Data: []byte(`{"x":[]}`)}}})
	f.Add(logRec)
	full, _ := encodeRecord(logRec, &record{Type: "snap", Snap: &snapRecord{Index: 1, Term: 1, Data: []byte("{}")}})
	full, _ = encodeRecord(full, &record{Type: "set", Key: "CurrentTerm", Val: []byte("1")})
	full, _ = encodeRecord(full, &record{Type: "trunc", From: 2})
	f.Add(full)
	f.Add(full[:len(full)-3])
	f.Add([]byte("GOVN RAFT 5 0\nnull\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openStore(path, quietLogger(t))
		if err != nil {
			return
		}
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		for i := first; i <= last && i != 0; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil {
				t.Fatalf("entry %d of %d-%d: %v", i, first, last, err)
			}
		}
		s.mu.Lock()
		err = s.rewriteLocked()
		s.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		s.close()
		s2, err := openStore(path, quietLogger(t))
		if err != nil {
			t.Fatalf("reopening a rewritten file: %v", err)
		}
		defer s2.close()
		if f2, _ := s2.FirstIndex(); f2 != first {
			t.Fatalf("first index %d after rewrite, was %d", f2, first)
		}
		if l2, _ := s2.LastIndex(); l2 != last {
			t.Fatalf("last index %d after rewrite, was %d", l2, last)
		}
	})
}
