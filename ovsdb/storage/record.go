package storage

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Record is one transaction record of a standalone database file: the rows a
// transaction inserted, modified or deleted, table by table.
type Record struct {
	// Date is when the transaction committed. Submit fills in the current
	// time when it is zero. The file keeps milliseconds.
	Date time.Time
	// Comment is the text of the transaction's "comment" operations joined
	// by newlines; empty means none.
	Comment string
	// IsDiff marks a record whose modified columns hold differences rather
	// than new values, as ovsdb-server 2.15 and later write ("_is_diff"):
	// for a set column the elements added or removed, for a map column the
	// pairs added, removed or changed. govn reads such records from files
	// the real ovsdb-server wrote, but writes only full new values.
	IsDiff bool
	// Tables maps a table name to its changed rows: each row UUID (36
	// characters) maps to a JSON object of the row's new column values, in
	// RFC 7047 <value> notation, or to nil (or JSON null) for a deleted row.
	// A new row lists its non-default columns, a modified row its changed
	// columns.
	Tables map[string]map[string]json.RawMessage
	// Encoded, when not nil, holds the tables already in the file's text,
	// and Submit writes it instead of Tables: the members that follow
	// "_date" (and "_comment"), each `,"TABLE":{"UUID":ROW,...}`, tables in
	// name order, rows in UUID order, compact JSON, a deleted row null (as
	// ovsdb.ChangeSet.AppendRecord writes them). It spares a large
	// transaction's rows a second encoding. Replay fills Tables only.
	Encoded []byte
}

// Header magic words of OVSDB files.
const (
	magicStandalone = "JSON"
	magicClustered  = "CLUSTER"
)

// encodeRecord returns the file form of one record whose JSON text is
// body: the header line "OVSDB JSON <length> <sha1>" and body plus LF.
func encodeRecord(dst []byte, body []byte) []byte {
	h := sha1.New()
	h.Write(body)
	h.Write([]byte{'\n'})
	var sum [sha1.Size]byte
	h.Sum(sum[:0])
	dst = append(dst, "OVSDB "+magicStandalone+" "...)
	dst = strconv.AppendInt(dst, int64(len(body)+1), 10)
	dst = append(dst, ' ')
	dst = hex.AppendEncode(dst, sum[:])
	dst = append(dst, '\n')
	dst = append(dst, body...)
	return append(dst, '\n')
}

// marshalRecord renders rec as the single-line JSON object the file holds.
// Row objects are compacted (which also checks that they are JSON), so the
// text never contains a raw LF. Tables and rows are written in sorted order
// so equal records give equal bytes.
func marshalRecord(rec Record) ([]byte, error) {
	var buf bytes.Buffer
	date := rec.Date
	if date.IsZero() {
		date = time.Now()
	}
	buf.WriteString(`{"_date":`)
	buf.WriteString(strconv.FormatInt(date.UnixMilli(), 10))
	if rec.Comment != "" {
		buf.WriteString(`,"_comment":`)
		writeString(&buf, rec.Comment)
	}
	if rec.IsDiff {
		buf.WriteString(`,"_is_diff":true`)
	}
	if rec.Encoded != nil {
		// The file's records are one line each.
		if bytes.IndexByte(rec.Encoded, '\n') >= 0 || len(rec.Encoded) > 0 && rec.Encoded[0] != ',' {
			return nil, errors.New("encoded tables: not one line of members")
		}
		buf.Grow(len(rec.Encoded) + 1)
		buf.Write(rec.Encoded)
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	tables := make([]string, 0, len(rec.Tables))
	for t := range rec.Tables {
		if t == "" || t[0] == '_' {
			return nil, fmt.Errorf("invalid table name %q", t)
		}
		tables = append(tables, t)
	}
	slices.Sort(tables)
	var uuids []string
	for _, t := range tables {
		rows := rec.Tables[t]
		buf.WriteByte(',')
		writeString(&buf, t)
		buf.WriteString(":{")
		uuids = uuids[:0]
		for u := range rows {
			uuids = append(uuids, u)
		}
		slices.Sort(uuids)
		for i, u := range uuids {
			if !validUUID(u) {
				return nil, fmt.Errorf("table %s: invalid row UUID %q", t, u)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteByte('"')
			buf.WriteString(u)
			buf.WriteString(`":`)
			row := rows[u]
			if len(row) == 0 {
				buf.WriteString("null")
				continue
			}
			start := buf.Len()
			if err := json.Compact(&buf, row); err != nil {
				return nil, fmt.Errorf("table %s row %s: %w", t, u, err)
			}
			if c := buf.Bytes()[start]; c != '{' && c != 'n' {
				return nil, fmt.Errorf("table %s row %s: want a JSON object or null, have %s", t, u, row)
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// writeString writes s as a JSON string without escaping HTML characters,
// so OVN match expressions stay readable in the file.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Truncate(buf.Len() - 1)
}

// validUUID reports whether s is a UUID in RFC 4122 text form.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// unmarshalRecord parses the JSON text of a transaction record.
func unmarshalRecord(body []byte) (Record, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return Record{}, fmt.Errorf("record is not a JSON object: %w", err)
	}
	if top == nil {
		return Record{}, errors.New("record is null, not a JSON object")
	}
	rec := Record{Tables: make(map[string]map[string]json.RawMessage, len(top))}
	// Members in order, so that of several errors the same one is
	// reported every time.
	for _, k := range slices.Sorted(maps.Keys(top)) {
		v := top[k]
		switch {
		case k == "_date":
			var ms json.Number
			if err := json.Unmarshal(v, &ms); err != nil {
				return Record{}, fmt.Errorf("_date: %w", err)
			}
			n, err := ms.Int64()
			if err != nil {
				f, ferr := ms.Float64()
				if ferr != nil {
					return Record{}, fmt.Errorf("_date %s: %w", ms, err)
				}
				n = int64(f)
			}
			if n < 1<<32 { // early OVSDB wrote seconds
				n *= 1000
			}
			rec.Date = time.UnixMilli(n)
		case k == "_comment":
			if err := json.Unmarshal(v, &rec.Comment); err != nil {
				return Record{}, fmt.Errorf("_comment: %w", err)
			}
		case k == "_is_diff":
			if err := json.Unmarshal(v, &rec.IsDiff); err != nil {
				return Record{}, fmt.Errorf("_is_diff: %w", err)
			}
		case k == "" || k[0] == '_':
			// Other special members carry no semantics.
		default:
			var rows map[string]json.RawMessage
			if err := json.Unmarshal(v, &rows); err != nil {
				return Record{}, fmt.Errorf("table %s: %w", k, err)
			}
			if rows == nil {
				return Record{}, fmt.Errorf("table %s: null instead of an object", k)
			}
			for u, row := range rows {
				if !validUUID(u) {
					return Record{}, fmt.Errorf("table %s: invalid row UUID %q", k, u)
				}
				switch {
				case bytes.Equal(row, []byte("null")):
					rows[u] = nil
				case len(row) == 0 || row[0] != '{':
					return Record{}, fmt.Errorf("table %s row %s: want a JSON object or null, have %.40s", k, u, row)
				}
			}
			rec.Tables[k] = rows
		}
	}
	return rec, nil
}
