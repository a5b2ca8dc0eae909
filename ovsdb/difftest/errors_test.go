package difftest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestErrorReplies sends the requests of testdata/errors.jsonl, one after
// another on one connection, to the real ovsdb-server and to the target,
// both serving testdata/errors.ovsschema, and compares every reply and
// notification: the error tags, details texts and "syntax" members of
// every class of error ovsdb-server has (JSON-RPC methods and their
// parameters, each operation and member of "transact", types and
// constraints, referential integrity, indexes, weak references, waits,
// mutations, aborts, locks, monitors), and what the good requests among
// them return (select's "sort", garbage collection of rows that only refer
// to themselves). ovn-nbctl and every IDL client print these texts to
// people.
func TestErrorReplies(t *testing.T) {
	need(t, "ovsdb-server", "ovsdb-tool")
	schemaText, err := os.ReadFile("testdata/errors.ovsschema")
	if err != nil {
		t.Fatal(err)
	}
	requests := readRequests(t, "testdata/errors.jsonl")
	ref := runRequests(t, startServerSchema(t, kindReal, "errors", schemaText), requests)
	got := runRequests(t, startServerSchema(t, target(), "errors", schemaText), requests)
	diffTranscripts(t, "error-replies", ref, got)
}

// readRequests returns the requests of a file of one JSON-RPC request a
// line, with blank lines and lines starting with "#" left out.
func readRequests(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !json.Valid([]byte(line)) {
			t.Fatalf("%s: not JSON: %s", path, line)
		}
		out = append(out, line)
	}
	return out
}

// runRequests sends each request on one connection to s and returns the
// transcript: each request, then the notifications that came before its
// reply, then the reply, normalized (see normalizeReply).
func runRequests(t *testing.T, s *dbServer, requests []string) string {
	t.Helper()
	c, err := net.Dial("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dec := json.NewDecoder(bufio.NewReader(c))
	dec.UseNumber()
	var b strings.Builder
	for _, req := range requests {
		fmt.Fprintf(&b, "$ %s\n", req)
		var r struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(req), &r)
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatalf("%s: %v", s.kind, err)
		}
		for {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var msg map[string]any
			if err := dec.Decode(&msg); err != nil {
				fmt.Fprintf(&b, "  connection: %v\n", err)
				t.Fatalf("%s: reading the reply to %s: %v\n%s", s.kind, req, err, s.logTail())
			}
			fmt.Fprintf(&b, "  %s\n", normalizeReply(req, msg))
			if _, isNotification := msg["method"]; !isNotification {
				break
			}
		}
	}
	// How long a "wait" waited before it timed out is the servers' own.
	text := waitedRE.ReplaceAllString(b.String(), "timed out after <N> ms")
	return canonicalIndexErrors(normalizeUUIDs(text))
}

var waitedRE = regexp.MustCompile(`timed out after \d+ ms`)

// normalizeReply renders one message for comparison: members sorted (the
// servers order them differently), and the rows of a select without
// "sort" sorted too, since both servers return them in hash order of
// their UUIDs.
func normalizeReply(req string, msg map[string]any) string {
	var r struct {
		Method string `json:"method"`
		Params []any  `json:"params"`
	}
	json.Unmarshal([]byte(req), &r)
	results, _ := msg["result"].([]any)
	if r.Method == "transact" && len(r.Params) > 0 {
		for i, op := range r.Params[1:] {
			o, _ := op.(map[string]any)
			if sort, _ := o["sort"].([]any); o["op"] != "select" || len(sort) > 0 || i >= len(results) {
				continue
			}
			res, _ := results[i].(map[string]any)
			if rows, ok := res["rows"].([]any); ok {
				slices.SortFunc(rows, func(a, b any) int { return bytes.Compare(mustJSON(a), mustJSON(b)) })
			}
		}
	}
	return string(mustJSON(msg))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// indexErrorRE matches the two rows that ovsdb-server's index-uniqueness
// error names.
var indexErrorRE = regexp.MustCompile(`(First row, with UUID <\d+>, [^.]*\.)  (Second row, with UUID <\d+>, [^.]*\.)`)

// canonicalIndexErrors puts the two rows of each index-uniqueness error
// in one order, in a transcript whose UUIDs are normalized: which
// ovsdb-server calls first is the order of its hash table of rows, keyed
// by their random UUIDs.
func canonicalIndexErrors(text string) string {
	return indexErrorRE.ReplaceAllStringFunc(text, func(s string) string {
		m := indexErrorRE.FindStringSubmatch(s)
		first := strings.TrimPrefix(m[1], "First row, ")
		second := strings.TrimPrefix(m[2], "Second row, ")
		if first > second {
			first, second = second, first
		}
		return "First row, " + first + "  Second row, " + second
	})
}
