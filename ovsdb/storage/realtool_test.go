package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func ovsdbTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ovsdb-tool")
	if err != nil {
		t.Skip("ovsdb-tool not installed")
	}
	return p
}

// toolRecords inserts, modifies and deletes rows of every column kind.
func toolRecords() []Record {
	row := func(s string) map[string]json.RawMessage {
		return map[string]json.RawMessage{uuidN(1): json.RawMessage(s)}
	}
	return []Record{
		{Tables: map[string]map[string]json.RawMessage{
			"U": {uuidN(100): json.RawMessage(`{"n": 1}`), uuidN(101): json.RawMessage(`{"n": 2}`)},
		}},
		{Comment: "add a row\nwith <&> in it", Tables: map[string]map[string]json.RawMessage{
			"T": row(`{"s": "ip4 && tcp.dst == 80\n\"x\"", "i": 42, "m": ["map", [["a", "1"], ["b", "2"]]],
				"r": ["set", [["uuid", "` + uuidN(100) + `"], ["uuid", "` + uuidN(101) + `"]]]}`),
		}},
		{Tables: map[string]map[string]json.RawMessage{
			"T": {uuidN(1): json.RawMessage(`{"i": 43, "r": ["uuid", "` + uuidN(101) + `"]}`),
				uuidN(2): json.RawMessage(`{"s": "second"}`)},
		}},
		{Tables: map[string]map[string]json.RawMessage{
			"T": {uuidN(2): nil},
			"U": {uuidN(100): nil},
		}},
	}
}

// TestRealToolReadsOurFile writes a database with Log and has the real
// ovsdb-tool show its log and query its contents, before and after a
// compaction.
func TestRealToolReadsOurFile(t *testing.T) {
	tool := ovsdbTool(t)
	path := create(t)
	l, _ := openReplay(t, path)
	defer func() { l.Close() }()
	appendAll(t, l, toolRecords())

	// The real tool honours our lock: it may not compact the file under us.
	if out, err := exec.Command(tool, "compact", path).CombinedOutput(); err == nil {
		t.Errorf("ovsdb-tool compact of a locked file succeeded: %s", out)
	}

	checkShowLog(t, tool, path, 1+len(toolRecords()))
	want := []map[string]any{{
		"_uuid": []any{"uuid", uuidN(1)},
		"s":     "ip4 && tcp.dst == 80\n\"x\"",
		"i":     float64(43),
		"m":     []any{"map", []any{[]any{"a", "1"}, []any{"b", "2"}}},
		"r":     []any{"uuid", uuidN(101)},
	}}
	checkQuery(t, tool, path, "T", []string{"_uuid", "s", "i", "m", "r"}, want)
	checkQuery(t, tool, path, "U", []string{"_uuid", "n"}, []map[string]any{{"_uuid": []any{"uuid", uuidN(101)}, "n": float64(2)}})

	snap := Record{Comment: "compacting database", Tables: map[string]map[string]json.RawMessage{
		"U": {uuidN(101): json.RawMessage(`{"n": 2}`)},
		"T": {uuidN(1): json.RawMessage(`{"s": "ip4 && tcp.dst == 80\n\"x\"", "i": 43, "m": ["map", [["a", "1"], ["b", "2"]]], "r": ["uuid", "` + uuidN(101) + `"]}`)},
	}}
	if err := l.Compact(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	appendAll(t, l, []Record{{Tables: map[string]map[string]json.RawMessage{"U": {uuidN(102): json.RawMessage(`{"n": 3}`)}}}})
	l.Close()
	checkShowLog(t, tool, path, 3)
	checkQuery(t, tool, path, "T", []string{"_uuid", "s", "i", "m", "r"}, want)
	checkQuery(t, tool, path, "U", []string{"_uuid", "n"}, []map[string]any{
		{"_uuid": []any{"uuid", uuidN(101)}, "n": float64(2)},
		{"_uuid": []any{"uuid", uuidN(102)}, "n": float64(3)},
	})
}

func checkShowLog(t *testing.T, tool, path string, records int) {
	t.Helper()
	out, err := exec.Command(tool, "-m", "show-log", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ovsdb-tool show-log: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "record ") {
			n++
		}
	}
	if n != records {
		t.Errorf("ovsdb-tool show-log lists %d records, want %d:\n%s", n, records, out)
	}
}

func checkQuery(t *testing.T, tool, path, table string, columns []string, want []map[string]any) {
	t.Helper()
	q, _ := json.Marshal([]any{"t", map[string]any{"op": "select", "table": table, "where": []any{}, "columns": columns}})
	out, err := exec.Command(tool, "query", path, string(q)).CombinedOutput()
	if err != nil {
		t.Fatalf("ovsdb-tool query: %v\n%s", err, out)
	}
	var res []struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 {
		t.Fatalf("ovsdb-tool query output %s: %v", out, err)
	}
	rows := res[0].Rows
	// Sort by UUID for a stable comparison.
	key := func(r map[string]any) string { return fmt.Sprint(r["_uuid"]) }
	for i := range rows {
		for j := i + 1; j < len(rows); j++ {
			if key(rows[j]) < key(rows[i]) {
				rows[i], rows[j] = rows[j], rows[i]
			}
		}
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("ovsdb-tool query %s:\n got %v\nwant %v", table, rows, want)
	}
}

// TestReadRealToolFile reads a file the real ovsdb-tool wrote, including
// its diff records.
func TestReadRealToolFile(t *testing.T) {
	tool := ovsdbTool(t)
	dir := t.TempDir()
	sf := filepath.Join(dir, "s.ovsschema")
	os.WriteFile(sf, []byte(testSchema), 0o644)
	path := filepath.Join(dir, "db")
	run := func(args ...string) string {
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovsdb-tool %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("create", path, sf)
	out := run("transact", path, `["t",{"op":"insert","table":"T","row":{"s":"a","m":["map",[["k","v"]]]}},{"op":"comment","comment":"first"}]`)
	var res []struct{ UUID []string }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	u := res[0].UUID[1]
	run("transact", path, `["t",{"op":"mutate","table":"T","where":[],"mutations":[["m","insert",["map",[["k2","v2"]]]]]}]`)

	l, got := openReplay(t, path)
	defer l.Close()
	if len(got) != 2 {
		t.Fatalf("read %d records, want 2", len(got))
	}
	if got[0].Comment != "first" || got[0].Tables["T"][u] == nil {
		t.Errorf("first record = %+v", got[0])
	}
	if !got[1].IsDiff {
		t.Error("ovsdb-tool's mutate record is not marked as a diff")
	}
	var schema struct{ Name string }
	if json.Unmarshal(l.Schema(), &schema); schema.Name != "t" {
		t.Errorf("schema = %s", l.Schema())
	}
	appendAll(t, l, testRecords(1))
}
