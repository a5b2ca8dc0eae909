package cluster

import (
	"bytes"
	"log/slog"
	"os"
	"testing"
)

// TestStoreAllocatesAhead: the store's file has space allocated ahead of
// its records (zeros), which a restart reads as the end of the records
// (no torn tail, nothing lost, new records go after the old); a torn
// record in that space is cut off as at the end of any file, and so is
// the space after it.
func TestStoreAllocatesAhead(t *testing.T) {
	st := newTestStore(t)
	path := st.path
	if err := st.StoreLogs(logs(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	size, noPrealloc := st.size, st.noPrealloc
	st.mu.Unlock()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if noPrealloc {
		t.Logf("this file system does not allocate ahead: only appends are tested")
	} else if fi.Size() < size+preallocChunk-4096 {
		t.Errorf("file of %d bytes for %d of records: nothing allocated ahead", fi.Size(), size)
	}
	st.close()

	reopen := func() (*store, string) {
		t.Helper()
		var warns bytes.Buffer
		s, err := openStore(path, slog.New(slog.NewTextHandler(&warns, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.close() })
		return s, warns.String()
	}
	st, warns := reopen()
	if warns != "" {
		t.Errorf("reopening warned: %s", warns)
	}
	if last, _ := st.LastIndex(); last != 3 {
		t.Fatalf("last index %d after reopening, want 3", last)
	}
	if err := st.StoreLogs(logs(4, 5, 1)); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	size = st.size
	st.mu.Unlock()
	st.close()

	st, warns = reopen()
	if warns != "" {
		t.Errorf("reopening warned: %s", warns)
	}
	if last, _ := st.LastIndex(); last != 5 {
		t.Fatalf("last index %d after a second reopening, want 5", last)
	}
	st.close()

	// A record cut short by a crash, in the space allocated ahead.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(magic+"100 0\n{\"t\":"), size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, warns = reopen()
	if warns == "" {
		t.Error("a torn record was not reported")
	}
	if last, _ := st.LastIndex(); last != 5 {
		t.Fatalf("last index %d after a torn record, want 5", last)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Errorf("after cutting the torn record the file has %v bytes (%v), want %d", fi.Size(), err, size)
	}
	if err := st.StoreLogs(logs(6, 6, 1)); err != nil {
		t.Fatal(err)
	}
	st.close()
	st, _ = reopen()
	if last, _ := st.LastIndex(); last != 6 {
		t.Fatalf("last index %d after writing past a cut tail, want 6", last)
	}
}
