package client

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/govn/govn/ovsdb"
)

// This file decodes table updates straight from their JSON bytes into
// cache rows, without building encoding/json's generic maps first: an
// initial monitor reply of a big database is the largest thing a client
// reads. decodeUpdates in monitor.go is the reference the fuzz test holds
// this decoder to.

// parser reads JSON from b.
type parser struct {
	b       []byte
	i       int
	depth   int
	scratch []colValue // rowValues' result, reused row after row
	// strs interns the short strings of one update: the values that
	// repeat across rows (external_ids keys, pipeline and stage names,
	// common actions) are then stored once, which cuts both the bytes the
	// cache holds and the garbage one big initial reply leaves behind.
	strs map[string]string
	// defaults are each table's row of default values, whose datums
	// every new row of the update starts from and, for the columns the
	// update leaves out, keeps: rows are immutable, so one default integer
	// or string can stand in all of them instead of one allocation a row.
	defaults map[*ovsdb.TableSchema][]ovsdb.Datum
	// scalars are the one-atom datums read so far in this update, shared
	// by every row holding the same value (a table_id, a priority, a
	// pipeline, a datapath reference): a datum is immutable once in a row.
	scalars map[ovsdb.Atom]ovsdb.Datum
	// maps are the small maps read so far in this update, by their JSON
	// text (mapKey), shared like scalars: a logical flow's external_ids
	// (its stage name and source) repeat across thousands of flows.
	maps   map[string]ovsdb.Datum
	keyBuf []byte
	// hits and misses count the lookups of strs, scalars and maps: an
	// update whose values hardly repeat stops sharing (see share), so that
	// it does not pay for maps of unique values.
	hits, misses int
}

// share reports whether the parser still looks values up to share them:
// not once a few thousand lookups have found fewer repeats than new
// values.
func (p *parser) share() bool {
	return p.misses < 4096 || p.hits >= p.misses
}

// maxSharedMap is the most pairs a map may have to be shared: larger
// ones rarely repeat.
const maxSharedMap = 4

// sharedMap returns d, or an equal map read before in this update.
func (p *parser) sharedMap(d ovsdb.Datum) ovsdb.Datum {
	if len(d.Keys) == 0 || len(d.Keys) > maxSharedMap || !p.share() {
		return d
	}
	b := p.keyBuf[:0]
	for i, k := range d.Keys {
		if k.Type() == ovsdb.TypeReal || d.Values[i].Type() == ovsdb.TypeReal {
			return d
		}
		b = k.AppendJSON(b)
		b = append(b, ':')
		b = d.Values[i].AppendJSON(b)
		b = append(b, ',')
	}
	p.keyBuf = b
	if len(b) > 4*maxIntern {
		return d
	}
	if s, ok := p.maps[string(b)]; ok {
		p.hits++
		return s
	}
	p.misses++
	if p.maps == nil {
		p.maps = make(map[string]ovsdb.Datum)
	}
	p.maps[string(b)] = d
	return d
}

// scalar returns the datum of the single atom a, shared with the rows of
// this update that hold the same value. Reals (NaN is not equal to
// itself) and long strings are not shared.
func (p *parser) scalar(a ovsdb.Atom) ovsdb.Datum {
	if a.Type() == ovsdb.TypeReal || len(a.Str()) > maxIntern || !p.share() {
		return ovsdb.Scalar(a)
	}
	if d, ok := p.scalars[a]; ok {
		p.hits++
		return d
	}
	p.misses++
	if p.scalars == nil {
		p.scalars = make(map[ovsdb.Atom]ovsdb.Datum)
	}
	d := ovsdb.Scalar(a)
	p.scalars[a] = d
	return d
}

// newRow returns a row of table t with every column at its default value,
// the defaults shared with the other rows of this update.
func (p *parser) newRow(t *ovsdb.TableSchema, id ovsdb.UUID) *ovsdb.Row {
	d, ok := p.defaults[t]
	if !ok {
		d = ovsdb.NewRow(t, id).Data
		if p.defaults == nil {
			p.defaults = make(map[*ovsdb.TableSchema][]ovsdb.Datum)
		}
		p.defaults[t] = d
	}
	return &ovsdb.Row{UUID: id, Data: slices.Clone(d)}
}

// maxIntern is the length of the longest string the parser interns:
// longer ones (most matches) rarely repeat, and interning them would only
// cost hashing.
const maxIntern = 64

// intern returns b as a string, shared with the equal strings read before
// in this update.
func (p *parser) intern(b []byte) string {
	if len(b) > maxIntern || !p.share() {
		return validUTF8(b)
	}
	if s, ok := p.strs[string(b)]; ok {
		p.hits++
		return s
	}
	p.misses++
	if !utf8.Valid(b) {
		return validUTF8(b)
	}
	s := string(b)
	if p.strs == nil {
		p.strs = make(map[string]string)
	}
	p.strs[s] = s
	return s
}

var errDepth = errors.New("nested too deeply")

func (p *parser) fail(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (p *parser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) expect(c byte) error {
	if p.peek() != c {
		if p.i >= len(p.b) {
			return p.fail("want %q, found the end", c)
		}
		return p.fail("want %q, found %q", c, p.b[p.i])
	}
	p.i++
	return nil
}

// str reads a JSON string.
func (p *parser) str() (string, error) {
	if err := p.expect('"'); err != nil {
		return "", err
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.intern(p.b[start:p.i])
			p.i++
			return s, nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return "", p.fail("control character in string")
		}
		p.i++
	}
	return "", p.fail("unterminated string")
}

// strSlow finishes a string that has escapes: it finds the closing quote
// and leaves the unescaping to ovsdb.DecodeJSON, so that both decoders
// read escapes alike (escapes are rare in OVSDB data; this path may be
// slower).
func (p *parser) strSlow(start int) (string, error) {
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '\\':
			p.i += 2
			continue
		case c == '"':
			p.i++
			v, err := ovsdb.DecodeJSON(p.b[start-1 : p.i])
			str, ok := v.(string)
			if err != nil || !ok {
				return "", p.fail("bad string: %v", err)
			}
			return str, nil
		}
		p.i++
	}
	return "", p.fail("unterminated string")
}

// validUTF8 returns b as a string with each invalid byte replaced by
// U+FFFD, as encoding/json does.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b)))
}

// number returns the text of a JSON number.
func (p *parser) number() (string, error) {
	p.ws()
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			p.i++
			continue
		}
		break
	}
	if p.i == start {
		return "", p.fail("want a number")
	}
	return string(p.b[start:p.i]), nil
}

// skip passes over any JSON value; the bytes were validated when the
// message was read.
func (p *parser) skip() error {
	switch p.peek() {
	case '"':
		_, err := p.str()
		return err
	case '{', '[':
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > 1000 {
			return errDepth
		}
		open := p.b[p.i]
		close := byte('}')
		if open == '[' {
			close = ']'
		}
		p.i++
		if p.peek() == close {
			p.i++
			return nil
		}
		for {
			if open == '{' {
				if _, err := p.str(); err != nil {
					return err
				}
				if err := p.expect(':'); err != nil {
					return err
				}
			}
			if err := p.skip(); err != nil {
				return err
			}
			switch p.peek() {
			case ',':
				p.i++
			case close:
				p.i++
				return nil
			default:
				return p.fail("want , or %q", close)
			}
		}
	case 't', 'f', 'n':
		for p.i < len(p.b) && 'a' <= p.b[p.i] && p.b[p.i] <= 'z' {
			p.i++
		}
		return nil
	case 0:
		return p.fail("unexpected end")
	}
	_, err := p.number()
	return err
}

// rawKey reads a member name without allocating when it has no escapes;
// the result is valid until the next read.
func (p *parser) rawKey() ([]byte, error) {
	if err := p.expect('"'); err != nil {
		return nil, err
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			p.i = start - 1
			s, err := p.str()
			return []byte(s), err
		}
		p.i++
	}
	return nil, p.fail("unterminated string")
}

// members calls f for each member of an object, positioned at its value;
// f must consume the value. key is valid only during the call.
func (p *parser) members(f func(key []byte) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		key, err := p.rawKey()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := f(key); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.fail("want , or } in object")
		}
	}
}

// elements calls f for each element of an array, positioned at it.
func (p *parser) elements(f func() error) error {
	if err := p.expect('['); err != nil {
		return err
	}
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		if err := f(); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.fail("want , or ] in array")
		}
	}
}

// isNull consumes a null if one is next.
func (p *parser) isNull() bool {
	if p.peek() == 'n' && len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// atom reads an atom of type t (without constraint checks).
func (p *parser) atom(t ovsdb.AtomicType) (ovsdb.Atom, error) {
	switch t {
	case ovsdb.TypeInteger:
		n, err := p.number()
		if err != nil {
			return ovsdb.Atom{}, err
		}
		i, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return ovsdb.Atom{}, p.fail("bad integer %s", n)
		}
		return ovsdb.Integer(i), nil
	case ovsdb.TypeReal:
		n, err := p.number()
		if err != nil {
			return ovsdb.Atom{}, err
		}
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return ovsdb.Atom{}, p.fail("bad real %s", n)
		}
		return ovsdb.Real(f), nil
	case ovsdb.TypeBoolean:
		switch {
		case len(p.b)-p.i >= 4 && p.peek() == 't' && string(p.b[p.i:p.i+4]) == "true":
			p.i += 4
			return ovsdb.Boolean(true), nil
		case len(p.b)-p.i >= 5 && p.peek() == 'f' && string(p.b[p.i:p.i+5]) == "false":
			p.i += 5
			return ovsdb.Boolean(false), nil
		}
		return ovsdb.Atom{}, p.fail("want a boolean")
	case ovsdb.TypeString:
		s, err := p.str()
		return ovsdb.String(s), err
	case ovsdb.TypeUUID:
		if err := p.expect('['); err != nil {
			return ovsdb.Atom{}, err
		}
		tag, err := p.str()
		if err != nil {
			return ovsdb.Atom{}, err
		}
		if tag != "uuid" {
			return ovsdb.Atom{}, p.fail("want [\"uuid\", ...], found %q", tag)
		}
		return p.uuidRest()
	}
	return ovsdb.Atom{}, p.fail("bad atomic type")
}

// uuidRest reads `, "UUID"]` after the tag of a uuid atom.
func (p *parser) uuidRest() (ovsdb.Atom, error) {
	if err := p.expect(','); err != nil {
		return ovsdb.Atom{}, err
	}
	s, err := p.str()
	if err != nil {
		return ovsdb.Atom{}, err
	}
	u, err := ovsdb.ParseUUID(s)
	if err != nil {
		return ovsdb.Atom{}, p.fail("%v", err)
	}
	if err := p.expect(']'); err != nil {
		return ovsdb.Atom{}, err
	}
	return ovsdb.UUIDAtom(u), nil
}

// datum reads the value of a column of type ct, without constraint checks
// (update2 diffs may exceed them).
func (p *parser) datum(ct *ovsdb.ColumnType) (ovsdb.Datum, error) {
	if ct.IsMap() {
		if err := p.expect('['); err != nil {
			return ovsdb.Datum{}, err
		}
		if tag, err := p.str(); err != nil || tag != "map" {
			return ovsdb.Datum{}, p.fail("want [\"map\", ...]")
		}
		if err := p.expect(','); err != nil {
			return ovsdb.Datum{}, err
		}
		var keys, values []ovsdb.Atom
		err := p.elements(func() error {
			if err := p.expect('['); err != nil {
				return err
			}
			k, err := p.atom(ct.Key.Type)
			if err != nil {
				return err
			}
			if err := p.expect(','); err != nil {
				return err
			}
			v, err := p.atom(ct.Value.Type)
			if err != nil {
				return err
			}
			keys, values = append(keys, k), append(values, v)
			return p.expect(']')
		})
		if err != nil {
			return ovsdb.Datum{}, err
		}
		if err := p.expect(']'); err != nil {
			return ovsdb.Datum{}, err
		}
		d := ovsdb.Map(keys, values)
		if d.Len() != len(keys) {
			return ovsdb.Datum{}, p.fail("map contains duplicate key")
		}
		return p.sharedMap(d), nil
	}
	if p.peek() != '[' {
		a, err := p.atom(ct.Key.Type)
		if err != nil {
			return ovsdb.Datum{}, err
		}
		return p.scalar(a), nil
	}
	p.i++
	tag, err := p.str()
	if err != nil {
		return ovsdb.Datum{}, err
	}
	switch {
	case tag == "uuid" && ct.Key.Type == ovsdb.TypeUUID:
		a, err := p.uuidRest()
		if err != nil {
			return ovsdb.Datum{}, err
		}
		return p.scalar(a), nil
	case tag != "set":
		return ovsdb.Datum{}, p.fail("want [\"set\", ...], found %q", tag)
	}
	if err := p.expect(','); err != nil {
		return ovsdb.Datum{}, err
	}
	var atoms []ovsdb.Atom
	err = p.elements(func() error {
		a, err := p.atom(ct.Key.Type)
		atoms = append(atoms, a)
		return err
	})
	if err != nil {
		return ovsdb.Datum{}, err
	}
	if err := p.expect(']'); err != nil {
		return ovsdb.Datum{}, err
	}
	n := len(atoms)
	d := ovsdb.Set(atoms...)
	if d.Len() != n {
		return ovsdb.Datum{}, p.fail("set contains duplicate value")
	}
	return d, nil
}

// colValue is one column's value read from a <row>.
type colValue struct {
	index int
	datum ovsdb.Datum
}

// rowValues reads a <row> object into p.scratch, the last value of a
// repeated column winning; columns t lacks are skipped.
func (p *parser) rowValues(t *ovsdb.TableSchema) ([]colValue, error) {
	p.scratch = p.scratch[:0]
	if p.isNull() {
		return nil, nil
	}
	err := p.members(func(name []byte) error {
		c := t.Column(string(name))
		if c == nil || c.Index < 0 {
			return p.skip()
		}
		d, err := p.datum(&c.Type)
		if err != nil {
			return fmt.Errorf("column %s: %w", name, err)
		}
		for i := range p.scratch {
			if p.scratch[i].index == c.Index {
				p.scratch[i].datum = d
				return nil
			}
		}
		p.scratch = append(p.scratch, colValue{c.Index, d})
		return nil
	})
	return p.scratch, err
}

// setRow sets vals on row; with diff, values of sets and maps are update2
// differences. Scalars and optional columns (at most one atom) carry their
// new value, as ovsdb-server sends them.
func setRow(t *ovsdb.TableSchema, row *ovsdb.Row, vals []colValue, diff bool) *ovsdb.Row {
	for _, v := range vals {
		c := t.Columns[v.index]
		d := v.datum
		if diff {
			d = ovsdb.ApplyDiff(row.Data[v.index], d, &c.Type)
		}
		row.Data[v.index] = d
	}
	return row
}

// parseUUID parses a canonical UUID from bytes without allocating. It is
// not ovsdb.ParseUUID because that takes a string, and converting every
// row's UUID bytes to one costs an allocation per row (BenchmarkParseUUID);
// the hexadecimal digits go through encoding/hex.
func parseUUID(b []byte) (ovsdb.UUID, error) {
	var raw [16]byte
	if len(b) != 36 || b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
		return ovsdb.UUID{}, fmt.Errorf("%q is not a UUID", b)
	}
	j := 0
	for _, group := range [...][2]int{{0, 8}, {9, 13}, {14, 18}, {19, 23}, {24, 36}} {
		n, err := hex.Decode(raw[j:], b[group[0]:group[1]])
		if err != nil {
			return ovsdb.UUID{}, fmt.Errorf("%q is not a UUID", b)
		}
		j += n
	}
	return ovsdb.UUIDFromBytes(raw), nil
}

// parseUpdates is decodeUpdates reading JSON bytes directly.
func parseUpdates(s *ovsdb.Schema, current tableReader, raw []byte, method monitorMethod) ([]Event, error) {
	p := &parser{b: raw}
	if p.peek() != '{' {
		return nil, fmt.Errorf("table updates: want an object")
	}
	type tableEvents struct {
		name   string
		events []Event
	}
	var tables []*tableEvents
	err := p.members(func(tkey []byte) error {
		t := s.Tables[string(tkey)]
		if t == nil {
			return p.skip()
		}
		te := &tableEvents{name: t.Name}
		tables = append(tables, te)
		cur := current(t.Name)
		return p.members(func(idText []byte) error {
			id, err := parseUUID(idText)
			if err != nil {
				return fmt.Errorf("table updates for %s: %w", t.Name, err)
			}
			old := cur[id]
			var e Event
			if method == methodPlain {
				e, err = p.rowUpdate(t, id, old)
			} else {
				e, err = p.rowUpdate2(t, id, old)
			}
			if err != nil {
				return fmt.Errorf("update of %s row %s: %w", t.Name, idText, err)
			}
			// A row without an event still counts for "the last
			// update of a repeated UUID wins": keep it as Kind 0.
			e.Table = t.Name
			if e.Kind == 0 {
				e.Old = &ovsdb.Row{UUID: id}
			}
			te.events = append(te.events, e)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if p.peek() != 0 {
		return nil, p.fail("data after the table updates")
	}
	// Tables in name order; a repeated table or row: the last one wins,
	// as with encoding/json.
	slices.SortStableFunc(tables, func(a, b *tableEvents) int { return compareStrings(a.name, b.name) })
	n := 0
	for i, te := range tables {
		if i+1 < len(tables) && tables[i+1].name == te.name {
			continue
		}
		n += len(te.events)
	}
	events := make([]Event, 0, n)
	for i, te := range tables {
		if i+1 < len(tables) && tables[i+1].name == te.name {
			continue
		}
		slices.SortStableFunc(te.events, func(a, b Event) int { return a.UUID().Compare(b.UUID()) })
		for j, e := range te.events {
			if j+1 < len(te.events) && te.events[j+1].UUID() == e.UUID() {
				continue
			}
			if e.Kind != 0 {
				events = append(events, e)
			}
		}
	}
	return events, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rowUpdate2 reads one <row-update2>.
func (p *parser) rowUpdate2(t *ovsdb.TableSchema, id ovsdb.UUID, old *ovsdb.Row) (Event, error) {
	var e Event
	n := 0
	err := p.members(func(kind []byte) error {
		n++
		switch string(kind) {
		case "initial", "insert":
			vals, err := p.rowValues(t)
			if err != nil {
				return err
			}
			row := setRow(t, p.newRow(t, id), vals, false)
			if old != nil {
				e = Event{Kind: Update, Old: old, New: row}
			} else {
				e = Event{Kind: Insert, New: row}
			}
		case "modify":
			if old == nil {
				return fmt.Errorf("modify of a row not in the cache")
			}
			vals, err := p.rowValues(t)
			if err != nil {
				return err
			}
			e = Event{Kind: Update, Old: old, New: setRow(t, old.Clone(), vals, true)}
		case "delete":
			if err := p.skip(); err != nil {
				return err
			}
			e = Event{}
			if old != nil {
				e = Event{Kind: Delete, Old: old}
			}
		default:
			return fmt.Errorf("unknown row update kind %q", kind)
		}
		return nil
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("want an object with one member")
	}
	return e, err
}

// rowUpdate reads one RFC 7047 <row-update> {"old":..., "new":...}.
func (p *parser) rowUpdate(t *ovsdb.TableSchema, id ovsdb.UUID, old *ovsdb.Row) (Event, error) {
	var newVals []colValue
	hasNew := false
	err := p.members(func(key []byte) error {
		if string(key) != "new" {
			return p.skip()
		}
		if p.isNull() {
			hasNew, newVals = false, nil
			return nil
		}
		vals, err := p.rowValues(t)
		hasNew, newVals = err == nil, slices.Clone(vals)
		return err
	})
	if err != nil {
		return Event{}, err
	}
	switch {
	case !hasNew && old == nil:
		return Event{}, nil
	case !hasNew:
		return Event{Kind: Delete, Old: old}, nil
	case old == nil:
		return Event{Kind: Insert, New: setRow(t, p.newRow(t, id), newVals, false)}, nil
	}
	return Event{Kind: Update, Old: old, New: setRow(t, old.Clone(), newVals, false)}, nil
}

// splitArray returns the raw elements of a JSON array.
func splitArray(raw []byte) ([][]byte, error) {
	p := &parser{b: raw}
	var elems [][]byte
	err := p.elements(func() error {
		p.ws()
		start := p.i
		if err := p.skip(); err != nil {
			return err
		}
		elems = append(elems, raw[start:p.i])
		return nil
	})
	return elems, err
}

// jsonString decodes raw as a JSON string, reporting whether it is one.
func jsonString(raw []byte) (string, bool) {
	p := &parser{b: raw}
	s, err := p.str()
	return s, err == nil && p.peek() == 0
}
