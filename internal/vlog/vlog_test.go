package vlog

import (
	"bytes"
	"log/slog"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(&buf, "northd", slog.LevelInfo))
	log.Debug("not written")
	log.Info("connected", "nb", []string{"unix:/a"}, "n", 3)
	log.With("db", "OVN_Southbound").WithGroup("txn").Warn("transaction failed", "err", "not owner", "ops", 2)
	log.Error("line\nbreak", "empty", "")
	want := "|00001|northd|INFO|connected nb=[unix:/a] n=3\n" +
		"|00002|northd|WARN|transaction failed db=OVN_Southbound txn.err=\"not owner\" txn.ops=2\n" +
		"|00003|northd|ERR|line break empty=\"\"\n"
	// Strip the timestamps, checking their shape.
	var got bytes.Buffer
	for _, line := range bytes.SplitAfter(buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		stamp := string(line[:24])
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", stamp); err != nil {
			t.Errorf("bad timestamp %q: %v", stamp, err)
		}
		got.Write(line[24:])
	}
	if got.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", got.String(), want)
	}
}
