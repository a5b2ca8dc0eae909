package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
	"github.com/govn/govn/ovsdb/storage"
)

// OpenFile opens the standalone database file at path, replays its
// transactions and returns the database and its log, ready for
// AddDatabase. The caller closes the log.
func OpenFile(path string, logger *slog.Logger) (*ovsdb.Database, *storage.Log, error) {
	l, err := storage.Open(path, storage.Options{Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	s, err := ovsdb.ParseSchema(l.Schema())
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	db := ovsdb.NewDatabase(s)
	n := 0
	err = l.Replay(func(r storage.Record) error {
		n++
		if err := db.ApplyRecord(r.Tables, r.IsDiff); err != nil {
			return fmt.Errorf("transaction record %d: %w", n, err)
		}
		return nil
	})
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return db, l, nil
}

// CreateFile writes a new, empty database file at path with the given
// schema, after checking that the schema parses.
func CreateFile(path string, schema []byte) error {
	if _, err := ovsdb.ParseSchema(schema); err != nil {
		return err
	}
	return storage.Create(path, schema)
}

// Listen listens on a passive remote ("punix:PATH" or "ptcp:PORT[:IP]").
// A stale unix socket left by a dead server is removed first.
func Listen(ctx context.Context, remote string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(remote, "punix:"); ok {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			if c, err := net.Dial("unix", path); err == nil {
				c.Close()
				return nil, fmt.Errorf("%s: another server is listening there", path)
			}
			os.Remove(path)
		}
	}
	return jsonrpc.Listen(ctx, remote)
}

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
