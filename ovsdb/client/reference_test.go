package client

import (
	"fmt"
	"maps"
	"slices"

	"github.com/govn/govn/ovsdb"
)

// The reference update decoder: simple, built on encoding/json's generic
// values and ovsdb.DecodeDatum. The client uses parseUpdates (decode.go);
// the tests hold it to this one.

// decodeUpdates turns a <table-updates2> (update2/update3, method !=
// methodPlain) or a <table-updates> (update) into events against the
// current rows. Rows in the update are applied in table and UUID order;
// unknown tables and columns are ignored (the server's schema may be newer
// than the request).
func decodeUpdates(s *ovsdb.Schema, current tableReader, v any, method monitorMethod) ([]Event, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("table updates: want an object, got %T", v)
	}
	var events []Event
	for _, tname := range slices.Sorted(maps.Keys(obj)) {
		t := s.Tables[tname]
		if t == nil {
			continue
		}
		rows, ok := obj[tname].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("table updates for %s: want an object", tname)
		}
		cur := current(tname)
		for _, idText := range slices.Sorted(maps.Keys(rows)) {
			id, err := ovsdb.ParseUUID(idText)
			if err != nil {
				return nil, fmt.Errorf("table updates for %s: %w", tname, err)
			}
			old := cur[id]
			var e *Event
			if method == methodPlain {
				e, err = decodeRowUpdate(t, id, old, rows[idText])
			} else {
				e, err = decodeRowUpdate2(t, id, old, rows[idText])
			}
			if err != nil {
				return nil, fmt.Errorf("update of %s row %s: %w", tname, idText, err)
			}
			if e != nil {
				events = append(events, *e)
			}
		}
	}
	return events, nil
}

// decodeRowUpdate2 decodes one <row-update2>.
func decodeRowUpdate2(t *ovsdb.TableSchema, id ovsdb.UUID, old *ovsdb.Row, v any) (*Event, error) {
	obj, ok := v.(map[string]any)
	if !ok || len(obj) != 1 {
		return nil, fmt.Errorf("want an object with one member")
	}
	for kind, body := range obj {
		switch kind {
		case "initial", "insert":
			row, err := decodeRow(t, ovsdb.NewRow(t, id), body, false)
			if err != nil {
				return nil, err
			}
			if old != nil {
				return &Event{Table: t.Name, Kind: Update, Old: old, New: row}, nil
			}
			return &Event{Table: t.Name, Kind: Insert, New: row}, nil
		case "modify":
			if old == nil {
				return nil, fmt.Errorf("modify of a row not in the cache")
			}
			row, err := decodeRow(t, old.Clone(), body, true)
			if err != nil {
				return nil, err
			}
			return &Event{Table: t.Name, Kind: Update, Old: old, New: row}, nil
		case "delete":
			if old == nil {
				return nil, nil // nothing to delete: the row was never seen
			}
			return &Event{Table: t.Name, Kind: Delete, Old: old}, nil
		default:
			return nil, fmt.Errorf("unknown row update kind %q", kind)
		}
	}
	return nil, nil
}

// decodeRowUpdate decodes one RFC 7047 <row-update> {"old":..., "new":...}.
func decodeRowUpdate(t *ovsdb.TableSchema, id ovsdb.UUID, old *ovsdb.Row, v any) (*Event, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want an object")
	}
	newBody, hasNew := obj["new"]
	if !hasNew || newBody == nil {
		if old == nil {
			return nil, nil
		}
		return &Event{Table: t.Name, Kind: Delete, Old: old}, nil
	}
	base := ovsdb.NewRow(t, id)
	if old != nil {
		base = old.Clone()
	}
	row, err := decodeRow(t, base, newBody, false)
	if err != nil {
		return nil, err
	}
	if old == nil {
		return &Event{Table: t.Name, Kind: Insert, New: row}, nil
	}
	return &Event{Table: t.Name, Kind: Update, Old: old, New: row}, nil
}

// decodeRow sets the columns in body (a <row> object) on row, which the
// caller owns. With diff, values are update2 differences to apply.
func decodeRow(t *ovsdb.TableSchema, row *ovsdb.Row, body any, diff bool) (*ovsdb.Row, error) {
	if body == nil {
		return row, nil
	}
	obj, ok := body.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("row: want an object")
	}
	for name, val := range obj {
		c := t.Column(name)
		if c == nil || c.Index < 0 {
			continue
		}
		d, err := ovsdb.DecodeDatum(val, relaxed(&c.Type), nil)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", name, err)
		}
		if diff {
			d = ovsdb.ApplyDiff(row.Data[c.Index], d, &c.Type)
		}
		row.Data[c.Index] = d
	}
	return row, nil
}
