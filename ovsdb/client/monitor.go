package client

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/govn/govn/ovsdb"
)

// monitorMethod is one of the three ways to monitor, newest first.
type monitorMethod int

const (
	methodCondSince monitorMethod = iota // monitor_cond_since, update3
	methodCond                           // monitor_cond, update2
	methodPlain                          // monitor, update
)

func (m monitorMethod) String() string {
	return [...]string{"monitor_cond_since", "monitor_cond", "monitor"}[m]
}

// monitorID is the <json-value> naming the client's monitor.
const monitorID = "govn"

// zeroTxnID is the "no transaction" id of monitor_cond_since.
const zeroTxnID = "00000000-0000-0000-0000-000000000000"

// Condition is one clause of a monitor's "where" or an operation's
// "where": Column Function Value, e.g. {"name", "==", Scalar(String("ls1"))}.
// A Condition with Column "" is a constant: true unless Function is "false".
type Condition struct {
	Column   string
	Function string
	Value    ovsdb.Datum
}

// Constant returns the condition that is always v, for monitor requests.
func Constant(v bool) Condition {
	if v {
		return Condition{Function: "true"}
	}
	return Condition{Function: "false"}
}

// Equal returns the condition column == value.
func Equal(column string, value ovsdb.Datum) Condition {
	return Condition{Column: column, Function: "==", Value: value}
}

// appendJSON encodes the condition for table t.
func (c Condition) appendJSON(b []byte, t *ovsdb.TableSchema, names map[ovsdb.UUID]string) ([]byte, error) {
	if c.Column == "" {
		return append(b, fmt.Sprint(c.Function != "false")...), nil
	}
	col := t.Column(c.Column)
	if col == nil {
		return nil, fmt.Errorf("table %s has no column %q", t.Name, c.Column)
	}
	ct := col.Type
	switch c.Function {
	case "==", "!=", "includes", "excludes":
	case "<", "<=", ">", ">=":
		ct = ovsdb.ColumnType{Key: ct.Key, Min: 1, Max: 1}
	default:
		return nil, fmt.Errorf("unknown condition function %q", c.Function)
	}
	b = append(b, '[')
	b = ovsdb.AppendJSONString(b, c.Column)
	b = append(b, ',')
	b = ovsdb.AppendJSONString(b, c.Function)
	b = append(b, ',')
	b = appendDatum(b, c.Value, &ct, names)
	return append(b, ']'), nil
}

// appendDatum encodes d for a column of type ct, writing the UUIDs found in
// names as ["named-uuid", NAME]. A set given for a map column (the keys to
// delete with a "delete" mutation) is written as a set.
func appendDatum(b []byte, d ovsdb.Datum, ct *ovsdb.ColumnType, names map[ovsdb.UUID]string) []byte {
	if ct.IsMap() && d.Values == nil && d.Len() > 0 {
		ct = &ovsdb.ColumnType{Key: ct.Key, Min: 0, Max: ovsdb.Unlimited}
	}
	if len(names) == 0 || !hasNamed(d, names) {
		return d.AppendJSON(b, ct)
	}
	atom := func(b []byte, a ovsdb.Atom) []byte {
		if a.Type() == ovsdb.TypeUUID {
			if name, ok := names[a.UUID()]; ok {
				b = append(b, `["named-uuid",`...)
				b = ovsdb.AppendJSONString(b, name)
				return append(b, ']')
			}
		}
		return a.AppendJSON(b)
	}
	switch {
	case ct.IsMap():
		b = append(b, `["map",[`...)
		for i, k := range d.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = atom(b, k)
			b = append(b, ',')
			b = atom(b, d.Values[i])
			b = append(b, ']')
		}
		return append(b, "]]"...)
	case d.Len() == 1:
		return atom(b, d.Keys[0])
	}
	b = append(b, `["set",[`...)
	for i, k := range d.Keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = atom(b, k)
	}
	return append(b, "]]"...)
}

func hasNamed(d ovsdb.Datum, names map[ovsdb.UUID]string) bool {
	for _, atoms := range [][]ovsdb.Atom{d.Keys, d.Values} {
		for _, a := range atoms {
			if a.Type() == ovsdb.TypeUUID {
				if _, ok := names[a.UUID()]; ok {
					return true
				}
			}
		}
	}
	return false
}

// monitorRequests builds the <monitor-requests> object: for each table,
// the columns to monitor and, for conditional methods, the where clause.
func monitorRequests(s *ovsdb.Schema, tables map[string][]string, conds map[string][]Condition, method monitorMethod) ([]byte, error) {
	names := slices.Sorted(maps.Keys(tables))
	b := []byte{'{'}
	first := true
	for _, name := range names {
		t := s.Tables[name]
		if t == nil {
			continue // not in this server's schema: nothing to monitor
		}
		cols := tables[name]
		if cols == nil {
			for _, c := range t.Columns {
				cols = append(cols, c.Name)
			}
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = ovsdb.AppendJSONString(b, name)
		b = append(b, ':')
		if method != methodPlain {
			b = append(b, '[')
		}
		b = append(b, `{"columns":[`...)
		n := 0
		for _, c := range cols {
			if t.Column(c) == nil || strings.HasPrefix(c, "_") {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = ovsdb.AppendJSONString(b, c)
		}
		b = append(b, ']')
		if where, ok := conds[name]; ok && method != methodPlain {
			var err error
			if b, err = appendWhere(append(b, `,"where":`...), where, t, nil); err != nil {
				return nil, fmt.Errorf("monitor condition for %s: %w", name, err)
			}
		}
		b = append(b, '}')
		if method != methodPlain {
			b = append(b, ']')
		}
	}
	return append(b, '}'), nil
}

func appendWhere(b []byte, where []Condition, t *ovsdb.TableSchema, names map[ovsdb.UUID]string) ([]byte, error) {
	b = append(b, '[')
	for i, c := range where {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = c.appendJSON(b, t, names); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// relaxed returns ct without constraints, for decoding what a trusted
// server sends, including update2 diffs, which may hold more elements than
// the column allows.
func relaxed(ct *ovsdb.ColumnType) *ovsdb.ColumnType {
	r := &ovsdb.ColumnType{Key: ovsdb.NewBaseType(ct.Key.Type), Min: 0, Max: ovsdb.Unlimited}
	if ct.Value != nil {
		v := ovsdb.NewBaseType(ct.Value.Type)
		r.Value = &v
	}
	return r
}

// tableReader gives the update decoder the current rows of a table.
type tableReader func(table string) map[ovsdb.UUID]*ovsdb.Row

// resyncEvents compares the cache's rows with the complete contents the
// server sent (already decoded as inserts into fresh rows) and returns the
// events that turn one into the other: updates for rows whose data
// differ, inserts and deletes for the rest.
func resyncEvents(monitored []string, current tableReader, full []Event) []Event {
	fresh := map[string]map[ovsdb.UUID]*ovsdb.Row{}
	for _, e := range full {
		if fresh[e.Table] == nil {
			fresh[e.Table] = map[ovsdb.UUID]*ovsdb.Row{}
		}
		fresh[e.Table][e.New.UUID] = e.New
	}
	var events []Event
	for _, table := range monitored {
		old := current(table)
		now := fresh[table]
		ids := make([]ovsdb.UUID, 0, len(old)+len(now))
		for id := range old {
			ids = append(ids, id)
		}
		for id := range now {
			if _, ok := old[id]; !ok {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, ovsdb.UUID.Compare)
		for _, id := range ids {
			o, n := old[id], now[id]
			switch {
			case o == nil:
				events = append(events, Event{Table: table, Kind: Insert, New: n})
			case n == nil:
				events = append(events, Event{Table: table, Kind: Delete, Old: o})
			case !sameData(o, n):
				events = append(events, Event{Table: table, Kind: Update, Old: o, New: n})
			}
		}
	}
	return events
}

func sameData(a, b *ovsdb.Row) bool {
	if len(a.Data) != len(b.Data) {
		return false
	}
	for i := range a.Data {
		if !a.Data[i].Equal(b.Data[i]) {
			return false
		}
	}
	return true
}
