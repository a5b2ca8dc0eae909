package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb/server"
	"github.com/govn/govn/ovsdb/storage"
)

const toolOldSchema = `{"name":"Conv","version":"1.0.0","tables":{
 "Sw":{"isRoot":true,"columns":{"name":{"type":"string"},"tags":{"type":{"key":"string","min":0,"max":"unlimited"}},"gone":{"type":"integer"}}},
 "Old":{"isRoot":true,"columns":{"x":{"type":"integer"}}}}}`

const toolNewSchema = `{"name":"Conv","version":"2.0.0","tables":{
 "Sw":{"isRoot":true,"columns":{"name":{"type":"string"},"tags":{"type":{"key":"string","min":0,"max":2}},"weight":{"type":"integer"}}}}}`

// toolDB writes a database file under toolOldSchema holding two rows.
func toolDB(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "conv.db")
	if err := server.CreateFile(path, []byte(toolOldSchema)); err != nil {
		t.Fatal(err)
	}
	l, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Replay(func(storage.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	rec := storage.Record{Tables: map[string]map[string]json.RawMessage{
		"Sw":  {"00000000-0000-0000-0000-000000000001": json.RawMessage(`{"name":"s1","tags":["set",["a","b"]],"gone":3}`)},
		"Old": {"00000000-0000-0000-0000-000000000002": json.RawMessage(`{"x":1}`)},
	}}
	if err := l.Append(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func dbTool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runDBTool(context.Background(), &out, args)
	return out.String(), err
}

func TestDBTool(t *testing.T) {
	dir := t.TempDir()
	path := toolDB(t, dir)
	newSchema := filepath.Join(dir, "new.ovsschema")
	narrow := filepath.Join(dir, "narrow.ovsschema")
	os.WriteFile(newSchema, []byte(toolNewSchema), 0o644)
	os.WriteFile(narrow, []byte(strings.Replace(toolNewSchema, `"max":2`, `"max":1`, 1)), 0o644)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"db-version", path}, "1.0.0\n"},
		{[]string{"schema-version", newSchema}, "2.0.0\n"},
		{[]string{"needs-conversion", path, newSchema}, "yes\n"},
	} {
		if got, err := dbTool(t, tc.args...); err != nil || got != tc.want {
			t.Errorf("govn db %q = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	for _, bad := range [][]string{{"convert", path}, {"db-version"}, {"schema-version", "a", "b"}, {"needs-conversion", path}} {
		if _, err := dbTool(t, bad...); !errors.Is(err, errUsage) {
			t.Errorf("govn db %q: error %v, want a usage error", bad, err)
		}
	}
	if _, err := dbTool(t, "db-version", filepath.Join(dir, "missing.db")); err == nil {
		t.Error("db-version of a missing file succeeded")
	}

	// A conversion the data do not fit leaves the file alone.
	before, _ := os.ReadFile(path)
	if _, err := dbTool(t, "convert", path, narrow); err == nil || !strings.Contains(err.Error(), "tags") {
		t.Errorf("narrowing convert: error %v, want one naming column tags", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("failed conversion changed the file")
	}

	realCopy := filepath.Join(dir, "real.db")
	os.WriteFile(realCopy, before, 0o644)
	if _, err := dbTool(t, "convert", path, newSchema); err != nil {
		t.Fatalf("convert: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"db-version", path}, "2.0.0\n"},
		{[]string{"needs-conversion", path, newSchema}, "no\n"},
	} {
		if got, err := dbTool(t, tc.args...); err != nil || got != tc.want {
			t.Errorf("after convert: govn db %q = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	db, log, err := server.OpenFile(path, nil)
	if err != nil {
		t.Fatalf("opening the converted file: %v", err)
	}
	log.Close()
	if db.Table("Old") != nil || len(db.Table("Sw").Rows) != 1 {
		t.Errorf("converted file: tables %v, %d Sw rows", db.Schema.TableNames, len(db.Table("Sw").Rows))
	}

	// The real ovsdb-tool reads govn's result and, converting the same
	// input itself, gets the same rows.
	if _, err := exec.LookPath("ovsdb-tool"); err != nil {
		t.Skip("ovsdb-tool not installed")
	}
	tool := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "ovsdb-tool", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovsdb-tool %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if got := tool("db-version", path); got != "2.0.0\n" {
		t.Errorf("ovsdb-tool db-version %q", got)
	}
	tool("show-log", path)
	tool("convert", realCopy, newSchema)
	query := `["Conv",{"op":"select","table":"Sw","where":[],"columns":["_uuid","name","tags","weight"]}]`
	if g, r := tool("query", path, query), tool("query", realCopy, query); g != r {
		t.Errorf("converted rows differ\ngovn:         %s\novsdb-tool:   %s", g, r)
	}
}

// TestClusterFileCommands: create-cluster and join-cluster write files
// that db-is-clustered, db-name, db-cid, db-sid and db-local-address read,
// as ovsdb-tool's commands do; a standalone file answers "no".
func TestClusterFileCommands(t *testing.T) {
	dir := t.TempDir()
	a, b, s := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db"), filepath.Join(dir, "s.db")
	for _, args := range [][]string{
		{"db", "create-cluster", a, "nb", "tcp:127.0.0.1:6641"},
		{"db", "join-cluster", b, "OVN_Northbound", "tcp:127.0.0.1:6642", "tcp:127.0.0.1:6641"},
		{"db", "create", s, "nb"},
	} {
		if code, _, stderr := runCapture(args...); code != 0 {
			t.Fatalf("govn %q: exit %d: %s", args, code, stderr)
		}
	}
	out := func(args ...string) (int, string) {
		code, stdout, _ := runCapture(append([]string{"db"}, args...)...)
		return code, strings.TrimSpace(stdout)
	}
	if code, _ := out("db-is-clustered", a); code != 0 {
		t.Errorf("db-is-clustered of a clustered file: exit %d", code)
	}
	if code, _ := out("db-is-clustered", s); code != 2 {
		t.Errorf("db-is-clustered of a standalone file: exit %d, want 2", code)
	}
	if code, _ := out("db-is-standalone", s); code != 0 {
		t.Errorf("db-is-standalone of a standalone file: exit %d", code)
	}
	for _, f := range []string{a, b, s} {
		if _, name := out("db-name", f); name != "OVN_Northbound" {
			t.Errorf("db-name %s = %q", f, name)
		}
	}
	if _, addr := out("db-local-address", b); addr != "tcp:127.0.0.1:6642" {
		t.Errorf("db-local-address = %q", addr)
	}
	_, cid := out("db-cid", a)
	_, sidA := out("db-sid", a)
	_, sidB := out("db-sid", b)
	if len(cid) != 36 || len(sidA) != 36 || len(sidB) != 36 || sidA == sidB {
		t.Errorf("db-cid %q, db-sid %q and %q", cid, sidA, sidB)
	}
	if code, _ := out("db-cid", b); code == 0 {
		t.Errorf("db-cid of a server that has not joined succeeded")
	}
	for _, bad := range [][]string{
		{"db", "create-cluster", filepath.Join(dir, "x.db"), "nb", "127.0.0.1:6641"},
		{"db", "create-cluster", filepath.Join(dir, "x.db"), "nb", "ssl:127.0.0.1"},
		{"db", "create-cluster", filepath.Join(dir, "x.db"), "nb", "unix:" + filepath.Join(dir, "x.sock")},
		{"db", "create-cluster", a, "nb", "tcp:127.0.0.1:6641"},
		{"db", "join-cluster", filepath.Join(dir, "y.db"), "OVN_Northbound", "tcp:127.0.0.1:6643", "tcp:nohost:1"},
	} {
		if code, _, _ := runCapture(bad...); code == 0 {
			t.Errorf("govn %q succeeded", bad)
		}
	}
}
