package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// FuzzRecordReader feeds arbitrary bytes to the record reader and the
// record parser. Neither may panic, every error but EOF must be ErrCorrupt
// or the refusal of clustered files, and a record that parses must survive
// being written and read again unchanged in meaning.
func FuzzRecordReader(f *testing.F) {
	schema := encodeRecord(nil, []byte(`{"name":"t","tables":{}}`))
	f.Add(schema)
	for _, r := range testRecords(4) {
		body, _ := marshalRecord(r)
		f.Add(append(bytes.Clone(schema), encodeRecord(nil, body)...))
	}
	f.Add([]byte("OVSDB JSON 99999999999999999999 0\n"))
	f.Add([]byte("OVSDB JSON 3 a9fcd54b25e7e863d72cd47c08af46e61b74b561\n{}\n"))
	f.Add([]byte("OVSDB CLUSTER 3 a9fcd54b25e7e863d72cd47c08af46e61b74b561\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rr := newRecordReader(bytes.NewReader(data), int64(len(data)))
		for {
			body, err := rr.next()
			if err == io.EOF {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !bytes.Contains(data, []byte("CLUSTER")) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if rr.offset > int64(len(data)) {
				t.Fatalf("offset %d past the end (%d)", rr.offset, len(data))
			}
			rec, err := unmarshalRecord(body)
			if err != nil {
				continue
			}
			again, err := marshalRecord(rec)
			if err != nil {
				continue // e.g. a date out of range for milliseconds
			}
			rec2, err := unmarshalRecord(again)
			if err != nil {
				t.Fatalf("re-encoded record does not parse: %v\n%s", err, again)
			}
			if len(rec2.Tables) != len(rec.Tables) || rec2.Comment != rec.Comment || rec2.IsDiff != rec.IsDiff {
				t.Fatalf("record changed in a round trip:\n%s\n%s", body, again)
			}
		}
	})
}

// BenchmarkAppend measures durable appends of a one-row record from 1 and
// from 16 concurrent committers; with group commit the 16-way figure
// should be many times the 1-way one (one fsync serves a whole batch).
func BenchmarkAppend(b *testing.B) {
	for _, workers := range []int{1, 16} {
		b.Run(map[int]string{1: "clients=1", 16: "clients=16"}[workers], func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "db")
			if err := Create(path, []byte(testSchema)); err != nil {
				b.Fatal(err)
			}
			l, err := Open(path, Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if err := l.Replay(func(Record) error { return nil }); err != nil {
				b.Fatal(err)
			}
			rec := testRecords(1)[0]
			b.ResetTimer()
			var before syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				n := b.N / workers
				if w < b.N%workers {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < n; i++ {
						if err := l.Append(context.Background(), rec); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			var after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := func(r *syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
			// CPU time per append: the runtime's handling of long
			// system calls shows here, not in the wall time.
			b.ReportMetric(float64(cpu(&after)-cpu(&before))/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txn/s")
			st, _ := os.Stat(path)
			b.ReportMetric(float64(st.Size())/float64(b.N), "bytes/txn")
		})
	}
}
