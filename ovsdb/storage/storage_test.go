package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

const testSchema = `{"name":"t","version":"1.0.0","tables":{
 "T":{"columns":{"s":{"type":"string"},"i":{"type":"integer"},
   "m":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},
   "r":{"type":{"key":{"type":"uuid","refTable":"U"},"min":0,"max":"unlimited"}}},"isRoot":true},
 "U":{"columns":{"n":{"type":"integer"}},"isRoot":true}}}`

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func uuidN(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n) }

// testRecords returns n records that exercise inserts, updates, deletes,
// comments and awkward strings.
func testRecords(n int) []Record {
	var recs []Record
	for i := 0; i < n; i++ {
		rec := Record{
			Date: time.UnixMilli(1700000000000 + int64(i)),
			Tables: map[string]map[string]json.RawMessage{
				"T": {uuidN(i): json.RawMessage(fmt.Sprintf(`{"s": "line\nbreak <&> \"q\" %d é", "i": %d, "m": ["map", [["k", "v%d"]]]}`, i, i, i))},
			},
		}
		if i%3 == 1 {
			rec.Comment = fmt.Sprintf("comment %d\nsecond line", i)
			rec.Tables["U"] = map[string]json.RawMessage{uuidN(1000 + i): json.RawMessage(`{"n":7}`)}
		}
		if i%4 == 3 {
			rec.Tables["T"][uuidN(i-1)] = nil // delete the previous row
		}
		recs = append(recs, rec)
	}
	return recs
}

func create(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	if err := Create(path, json.RawMessage(testSchema)); err != nil {
		t.Fatal(err)
	}
	return path
}

func openReplay(t testing.TB, path string) (*Log, []Record) {
	t.Helper()
	return openReplayOpts(t, path, Options{Logger: quiet})
}

// openFast opens without fsync, for tests of recovery logic that open
// hundreds of files.
func openFast(t testing.TB, path string) (*Log, []Record) {
	t.Helper()
	return openReplayOpts(t, path, Options{Logger: quiet, noSync: true})
}

func openReplayOpts(t testing.TB, path string, opts Options) (*Log, []Record) {
	t.Helper()
	l, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []Record
	if err := l.Replay(func(r Record) error { got = append(got, r); return nil }); err != nil {
		l.Close()
		t.Fatal(err)
	}
	return l, got
}

func appendAll(t testing.TB, l *Log, recs []Record) {
	t.Helper()
	for _, r := range recs {
		if err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// sameRecords compares records by meaning: row JSON is compared decoded.
func sameRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.Date.Equal(w.Date) || g.Comment != w.Comment || g.IsDiff != w.IsDiff {
			t.Errorf("record %d: date/comment/diff = %v %q %v, want %v %q %v", i, g.Date, g.Comment, g.IsDiff, w.Date, w.Comment, w.IsDiff)
		}
		if !reflect.DeepEqual(decodeTables(t, g.Tables), decodeTables(t, w.Tables)) {
			t.Errorf("record %d tables:\n got %v\nwant %v", i, decodeTables(t, g.Tables), decodeTables(t, w.Tables))
		}
	}
}

func decodeTables(t *testing.T, tables map[string]map[string]json.RawMessage) map[string]map[string]any {
	out := map[string]map[string]any{}
	for tn, rows := range tables {
		out[tn] = map[string]any{}
		for u, row := range rows {
			var v any
			if row != nil {
				if err := json.Unmarshal(row, &v); err != nil {
					t.Fatal(err)
				}
			}
			out[tn][u] = v
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	path := create(t)
	l, got := openReplay(t, path)
	if len(got) != 0 {
		t.Fatalf("new database has %d records", len(got))
	}
	var schema map[string]any
	if err := json.Unmarshal(l.Schema(), &schema); err != nil || schema["name"] != "t" {
		t.Fatalf("schema = %s (%v)", l.Schema(), err)
	}
	recs := testRecords(10)
	appendAll(t, l, recs[:5])
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, got = openReplay(t, path)
	sameRecords(t, got, recs[:5])
	appendAll(t, l, recs[5:])
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, recs)

	// Every record is one header line and one JSON line.
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2*(len(recs)+1) {
		t.Errorf("file has %d lines, want %d", len(lines), 2*(len(recs)+1))
	}
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "OVSDB JSON ") {
			t.Errorf("line %d = %q, want a header", i+1, lines[i])
		}
	}
}

func TestCreateRefusesExistingAndBadSchema(t *testing.T) {
	path := create(t)
	if err := Create(path, json.RawMessage(testSchema)); err == nil {
		t.Error("Create over an existing file succeeded")
	}
	dir := t.TempDir()
	for _, bad := range []string{``, `[]`, `{"version":"1"}`, `{"name":"x"`, `null`} {
		if err := Create(filepath.Join(dir, "x"), json.RawMessage(bad)); err == nil {
			t.Errorf("Create with schema %q succeeded", bad)
		}
	}
}

func TestSubmitErrors(t *testing.T) {
	path := create(t)
	l, err := Open(path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Submit(testRecords(1)[0]); err == nil {
		t.Error("Submit before Replay succeeded")
	}
	if err := l.Replay(func(Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	bad := []Record{
		{Tables: map[string]map[string]json.RawMessage{"T": {"not-a-uuid": json.RawMessage(`{}`)}}},
		{Tables: map[string]map[string]json.RawMessage{"T": {uuidN(1): json.RawMessage(`{"a":`)}}},
		{Tables: map[string]map[string]json.RawMessage{"T": {uuidN(1): json.RawMessage(`[1]`)}}},
		{Tables: map[string]map[string]json.RawMessage{"_T": {uuidN(1): json.RawMessage(`{}`)}}},
	}
	for i, r := range bad {
		if _, err := l.Submit(r); err == nil {
			t.Errorf("bad record %d accepted", i)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Submit(testRecords(1)[0]); err == nil {
		t.Error("Submit after Close succeeded")
	}
	_, got, err := ReadFile(path)
	if err != nil || len(got) != 0 {
		t.Errorf("after rejected records: %d records, %v", len(got), err)
	}
}

func TestLock(t *testing.T) {
	path := create(t)
	l, _ := openReplay(t, path)
	if l2, err := Open(path, Options{Logger: quiet}); err == nil {
		l2.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _ = openReplay(t, path)
	l.Close()
}

// boundaries returns the offsets just past each record of a file.
func boundaries(t *testing.T, data []byte) []int64 {
	rr := newRecordReader(bytes.NewReader(data), int64(len(data)))
	var ends []int64
	for {
		_, err := rr.next()
		if err == io.EOF {
			return ends
		}
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, rr.offset)
	}
}

// TestTornTail cuts a file at every length past its schema record and
// checks that recovery keeps exactly the complete records, truncates the
// rest, and appends cleanly after it.
func TestTornTail(t *testing.T) {
	path := create(t)
	recs := testRecords(4)
	l, _ := openReplay(t, path)
	appendAll(t, l, recs)
	l.Close()
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ends := boundaries(t, full)
	dir := t.TempDir()
	extra := testRecords(6)[5]
	for cut := ends[0]; cut < int64(len(full)); cut++ {
		complete := 0
		for _, e := range ends[1:] {
			if e <= cut {
				complete++
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("cut%d", cut))
		if err := os.WriteFile(p, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		l, got := openFast(t, p)
		if len(got) != complete {
			t.Fatalf("cut at %d: recovered %d records, want %d", cut, len(got), complete)
		}
		if st, _ := os.Stat(p); st.Size() != ends[complete] {
			t.Fatalf("cut at %d: file is %d bytes after recovery, want %d", cut, st.Size(), ends[complete])
		}
		appendAll(t, l, []Record{extra})
		l.Close()
		_, got, err := ReadFile(p)
		if err != nil || len(got) != complete+1 {
			t.Fatalf("cut at %d: after append, %d records, %v", cut, len(got), err)
		}
		sameRecords(t, got, append(append([]Record{}, recs[:complete]...), extra))
		os.Remove(p)
	}
}

// TestCorruptRecord flips one byte at a time in the last record and checks
// that recovery drops that record and keeps the ones before it.
func TestCorruptRecord(t *testing.T) {
	path := create(t)
	recs := testRecords(3)
	l, _ := openReplay(t, path)
	appendAll(t, l, recs)
	l.Close()
	full, _ := os.ReadFile(path)
	ends := boundaries(t, full)
	last := ends[len(ends)-2]
	p := filepath.Join(t.TempDir(), "db")
	for pos := last; pos < int64(len(full)); pos++ {
		data := bytes.Clone(full)
		data[pos] ^= 0x01 // ^0x20 would turn hex digits to upper case, which is the same checksum
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, got := openFast(t, p)
		l.Close()
		if len(got) != len(recs)-1 {
			t.Fatalf("byte %d flipped: recovered %d records, want %d", pos, len(got), len(recs)-1)
		}
	}
	// Bad JSON behind a correct header and checksum is corrupt too.
	data := append(bytes.Clone(full), encodeRecord(nil, []byte(`{"T":`))...)
	os.WriteFile(p, data, 0o600)
	l, got := openReplay(t, p)
	l.Close()
	if len(got) != len(recs) {
		t.Errorf("record with bad JSON: recovered %d records, want %d", len(got), len(recs))
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	schemaRec := encodeRecord(nil, []byte(`{"name":"t","tables":{}}`))
	cases := map[string][]byte{
		"empty":          {},
		"not ovsdb":      []byte("hello\n"),
		"torn schema":    schemaRec[:len(schemaRec)-3],
		"clustered":      []byte("OVSDB CLUSTER 3 a9fcd54b25e7e863d72cd47c08af46e61b74b561\n{}\n"),
		"schema not obj": encodeRecord(nil, []byte(`[1]`)),
	}
	for name, data := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(p, data, 0o600)
		if l, err := Open(p, Options{Logger: quiet}); err == nil {
			l.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
	// A checksummed record that is not a transaction record is an error,
	// not a torn tail to cut away.
	p := filepath.Join(dir, "badtxn")
	os.WriteFile(p, append(bytes.Clone(schemaRec), encodeRecord(nil, []byte(`{"T":5}`))...), 0o600)
	l, err := Open(p, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Replay(func(Record) error { return nil }); err == nil {
		t.Error("Replay accepted a table mapped to a number")
	}
	l.Close()
	if st, _ := os.Stat(p); st.Size() == int64(len(schemaRec)) {
		t.Error("Replay truncated a well-formed but invalid record")
	}
	// An error from apply stops Replay.
	l, _ = Open(filepath.Join(dir, "badtxn"), Options{Logger: quiet})
	l.Close()
}

func TestApplyError(t *testing.T) {
	path := create(t)
	l, _ := openReplay(t, path)
	appendAll(t, l, testRecords(2))
	l.Close()
	l, err := Open(path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	boom := errors.New("boom")
	if err := l.Replay(func(Record) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Replay = %v, want %v", err, boom)
	}
}

// TestGroupCommit has many goroutines append at once and checks every
// record arrives once, and that they shared fsyncs (fewer batches than
// records is what makes throughput scale).
func TestGroupCommit(t *testing.T) {
	path := create(t)
	l, _ := openReplay(t, path)
	const workers, each = 16, 20
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := Record{Tables: map[string]map[string]json.RawMessage{"U": {uuidN(w*1000 + i): json.RawMessage(`{"n":1}`)}}}
				if err := l.Append(context.Background(), r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	l.Close()
	_, got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range got {
		for u := range r.Tables["U"] {
			if seen[u] {
				t.Errorf("row %s twice", u)
			}
			seen[u] = true
		}
	}
	if len(seen) != workers*each {
		t.Errorf("%d rows, want %d", len(seen), workers*each)
	}
}

func TestCompaction(t *testing.T) {
	path := create(t)
	l, err := Open(path, Options{Logger: quiet, CompactMinSize: 2000, CompactGrowth: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Replay(func(Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if l.ShouldCompact() {
		t.Error("ShouldCompact on an empty database")
	}
	recs := testRecords(30)
	appendAll(t, l, recs)
	if !l.ShouldCompact() {
		t.Fatalf("ShouldCompact false at %d bytes", l.Size())
	}
	cp, err := l.StartCompaction()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartCompaction(); err == nil {
		t.Error("second concurrent compaction started")
	}
	// Records committed during the compaction must survive it.
	after := testRecords(40)[30:]
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		appendAll(t, l, after[:5])
	}()
	snapshot := Record{Date: time.UnixMilli(1700000000000), Comment: "compacting", Tables: map[string]map[string]json.RawMessage{
		"T": {uuidN(1): json.RawMessage(`{"s":"only row"}`)},
	}}
	wg.Wait()
	if err := cp.Finish(context.Background(), snapshot); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, after[5:])
	if l.ShouldCompact() {
		t.Errorf("ShouldCompact right after compaction (size %d)", l.Size())
	}
	size := l.Size()
	l.Close()
	if st, _ := os.Stat(path); st.Size() != size {
		t.Errorf("file is %d bytes, Log says %d", st.Size(), size)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	_, got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, append([]Record{snapshot}, after...))

	l, _ = openReplay(t, path)
	defer l.Close()
	if _, err := l.StartCompaction(); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(context.Background(), snapshot); err == nil {
		t.Error("Compact during a running compaction succeeded")
	}
}

// TestCompactionUnderLoad compacts while committers keep appending, and
// checks the compacted file holds the snapshot followed by exactly the
// records submitted after StartCompaction, in order, none twice.
func TestCompactionUnderLoad(t *testing.T) {
	path := create(t)
	l, _ := openReplay(t, path)
	var (
		order   sync.Mutex // orders Submit and StartCompaction, as a server's commit lock does
		seq     int
		after   []string // row UUIDs submitted after StartCompaction, in order
		started bool
	)
	submit := func() error {
		order.Lock()
		seq++
		u := uuidN(seq)
		c, err := l.Submit(Record{Tables: map[string]map[string]json.RawMessage{"U": {u: json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq))}}})
		if started {
			after = append(after, u)
		}
		order.Unlock()
		if err != nil {
			return err
		}
		return c.Wait(context.Background())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := submit(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if err := submit(); err != nil {
			t.Fatal(err)
		}
	}
	order.Lock()
	cp, err := l.StartCompaction()
	started = true
	order.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	snapshot := Record{Date: time.UnixMilli(1700000000000), Tables: map[string]map[string]json.RawMessage{"T": {uuidN(0): json.RawMessage(`{}`)}}}
	if err := cp.Finish(context.Background(), snapshot); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // some records surely after the swap
		if err := submit(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	l.Close()
	_, got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Tables["T"] == nil {
		t.Fatalf("compacted file does not start with the snapshot: %d records", len(got))
	}
	var have []string
	for _, r := range got[1:] {
		for u := range r.Tables["U"] {
			have = append(have, u)
		}
	}
	if !reflect.DeepEqual(have, after) {
		t.Fatalf("after the snapshot the file holds %d records, want the %d submitted after StartCompaction (first difference near %v)",
			len(have), len(after), firstDiff(have, after))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestEncodedRecord checks that a record given already encoded is written
// as the same record given by Tables, and that encoded tables spanning
// lines, or not starting a member, are refused.
func TestEncodedRecord(t *testing.T) {
	for i, rec := range testRecords(8) {
		want, err := marshalRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		// The members after the date and comment, as Tables renders
		// them.
		head, err := marshalRecord(Record{Date: rec.Date, Comment: rec.Comment})
		if err != nil {
			t.Fatal(err)
		}
		enc := want[len(head)-1 : len(want)-1]
		got, err := marshalRecord(Record{Date: rec.Date, Comment: rec.Comment, Encoded: enc})
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("record %d: encoded gives %s, %v; want %s", i, got, err, want)
		}
	}
	for _, enc := range []string{`,"T":{"` + uuidN(1) + `":{"s":"a` + "\n" + `"}}`, `"T":{}`} {
		if _, err := marshalRecord(Record{Encoded: []byte(enc)}); err == nil {
			t.Errorf("encoded tables %q accepted", enc)
		}
	}
}
