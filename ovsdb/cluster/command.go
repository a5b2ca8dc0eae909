package cluster

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/govn/govn/ovsdb"
)

// decodeCommand decodes a raft entry's data. An entry as Propose encodes
// it (appendCommand) is read without encoding/json, every member reading
// every transaction: its rows stay slices of data, which DecodeRecord
// parses. Anything else (a timer change, an earlier version's entry, a
// name that needs escapes) goes to json.Unmarshal.
func decodeCommand(data []byte) (command, error) {
	if c, ok := scanCommand(data); ok {
		return c, nil
	}
	var c command
	err := json.Unmarshal(data, &c)
	return c, err
}

// commandScanner reads the exact shape appendCommand writes:
// {"o":S,"e":N,"x":[{"id":"UUID","r":{"TABLE":{"UUID":ROW|null,...},...}}]}
// with no white space and no escapes outside the rows.
type commandScanner struct {
	b []byte
	i int
}

// scanCommand reads data as appendCommand wrote it; ok is false for
// anything else.
func scanCommand(data []byte) (c command, ok bool) {
	s := &commandScanner{b: data}
	if !s.lit(`{"o":`) {
		return c, false
	}
	if c.Origin, ok = s.str(); !ok || !s.lit(`,"e":`) {
		return c, false
	}
	if c.Epoch, ok = s.uint(); !ok || !s.lit(`,"x":[{"id":`) {
		return c, false
	}
	id, ok := s.str()
	if !ok || !s.lit(`,"r":{`) {
		return c, false
	}
	u, err := ovsdb.ParseUUID(id)
	if err != nil {
		return c, false
	}
	t := txnData{ID: u, Tables: map[string]map[string]json.RawMessage{}}
	for first := true; !s.lit("}"); first = false {
		if !first && !s.lit(",") {
			return c, false
		}
		tn, ok := s.str()
		if !ok || !s.lit(":{") {
			return c, false
		}
		rows := map[string]json.RawMessage{} // a table named twice: the last, as json.Unmarshal
		t.Tables[tn] = rows
		for firstRow := true; !s.lit("}"); firstRow = false {
			if !firstRow && !s.lit(",") {
				return c, false
			}
			key, ok := s.str()
			if !ok || !s.lit(":") {
				return c, false
			}
			row, ok := s.row()
			if !ok {
				return c, false
			}
			rows[key] = row
		}
	}
	if !s.lit("}]}") || s.i != len(s.b) {
		return c, false
	}
	c.Txns = []txnData{t}
	return c, true
}

func (s *commandScanner) lit(l string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(l)) {
		return false
	}
	s.i += len(l)
	return true
}

// str reads a string of printable ASCII without escapes.
func (s *commandScanner) str() (string, bool) {
	if !s.lit(`"`) {
		return "", false
	}
	for j := s.i; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := string(s.b[s.i:j])
			s.i = j + 1
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", false
		}
	}
	return "", false
}

// uint reads a decimal number without sign, fraction or exponent.
func (s *commandScanner) uint() (uint64, bool) {
	j := s.i
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j == s.i || (s.b[s.i] == '0' && j-s.i > 1) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	s.i = j
	return v, true
}

// row reads null or a JSON object, whose end it finds by its brackets
// and strings; the object is checked as JSON (DecodeRecord parses it
// anyway, but an entry is taken whole or not at all, as json.Unmarshal
// takes it).
func (s *commandScanner) row() (json.RawMessage, bool) {
	if s.lit("null") {
		return json.RawMessage(s.b[s.i-4 : s.i : s.i]), true
	}
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil, false
	}
	start, depth := s.i, 0
	for ; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '"':
			for s.i++; s.i < len(s.b) && s.b[s.i] != '"'; s.i++ {
				if s.b[s.i] == '\\' {
					s.i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				row := s.b[start:s.i:s.i]
				return row, json.Valid(row)
			}
		}
	}
	return nil, false
}
