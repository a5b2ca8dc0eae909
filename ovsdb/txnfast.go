package ovsdb

// This file executes the common insert operation straight from its text.
// A large transaction (ovn-northd's first Southbound: tens of thousands of
// Logical_Flow inserts) spends most of its time building the generic form
// of each operation, map[string]any and boxed strings, only to turn it into
// atoms; insertText skips that for an insert in the form clients write.

// textColumn is one column of an insert's row decoded by insertText: its
// datum, or, for a reference by uuid-name, the name to resolve once the
// insert is sure to succeed.
type textColumn struct {
	c    *ColumnSchema
	d    Datum
	name string // a named-uuid to resolve into d (a one-element set)
}

// insertText executes the insert operation whose text is op, as insert
// does its generic form, and reports whether it could. It handles an
// object of the members "op", "table", "row" and "uuid-name", each once,
// whose row gives user columns each once with values valid for them, a
// uuid-name only alone in its set, in fewer than rawArrayMin bytes; it
// changes nothing and returns handled
// false for anything else (another member, an error of any kind, a
// session with a WriteChecker), and the caller executes the operation
// through its generic form, which finds the same result or the error
// ovsdb-server gives.
func (t *txn) insertText(b []byte, op []byte) (_ []byte, handled bool) {
	// A large operation takes the generic path, which bounds the memory
	// its values may take (see memory.go).
	if len(op) >= rawArrayMin || t.opts.Checker != nil || t.refuseWrite("insert") != nil {
		return b, false
	}
	p := &jsonParser{data: op}
	var table, uuidName []byte
	var row struct{ start, end int }
	seenOp := false
	if !p.objectMembers(func(key []byte) bool {
		switch string(key) {
		case "op":
			v, ok := p.plainString()
			if seenOp || !ok || string(v) != "insert" {
				return false
			}
			seenOp = true
		case "table":
			v, ok := p.plainString()
			if table != nil || !ok {
				return false
			}
			table = v
		case "uuid-name":
			v, ok := p.plainString()
			if uuidName != nil || !ok || !isIdentifier(string(v)) {
				return false
			}
			uuidName = v
		case "row":
			if row.end != 0 || p.pos >= len(p.data) || p.data[p.pos] != '{' {
				return false
			}
			row.start = p.pos
			if _, err := p.skipValue(); err != nil {
				return false
			}
			row.end = p.pos
		default:
			return false
		}
		return true
	}) || !seenOp || table == nil {
		return b, false
	}
	if p.skipSpace(); p.pos != len(p.data) {
		return b, false
	}
	ts := t.db.Schema.Tables[string(table)]
	if ts == nil {
		return b, false
	}
	name := string(uuidName)
	if uuidName != nil && t.inserted[name] {
		return b, false
	}
	var cols []textColumn
	if row.end != 0 {
		var ok bool
		if cols, ok = t.rowText(op[row.start:row.end], ts); !ok {
			return b, false
		}
	}
	// Defaults must satisfy the constraints too (an enum without "").
	for _, c := range ts.Columns {
		if c.Type.Min == 0 || givenIn(cols, c) {
			continue
		}
		def := c.Type.Default()
		if c.Type.Key.Check(def.Keys[0]) != nil || c.Type.Value != nil && c.Type.Value.Check(def.Values[0]) != nil {
			return b, false
		}
	}

	// From here on nothing fails: the same steps as insert's.
	var uuid UUID
	if uuidName != nil {
		if prev, ok := t.names[name]; ok {
			uuid = prev
		} else {
			uuid = t.db.uuids.New()
		}
		t.names[name] = uuid
		t.inserted[name] = true
	} else {
		uuid = t.db.uuids.New()
	}
	r := NewRow(ts, uuid)
	r.Version = t.db.uuids.New()
	for i := range cols {
		tc := &cols[i]
		if tc.name != "" {
			ref, _ := t.resolve(tc.name) // an identifier: no error
			tc.d = Scalar(UUIDAtom(ref))
		}
		r.Data[tc.c.Index] = tc.d
	}
	t.setRow(ts, uuid, r)
	b = append(b, `{"uuid":`...)
	b = UUIDAtom(uuid).AppendJSON(b)
	return append(b, '}'), true
}

func givenIn(cols []textColumn, c *ColumnSchema) bool {
	for i := range cols {
		if cols[i].c == c {
			return true
		}
	}
	return false
}

// rowText decodes the <row> object text of an insert into ts, as
// DecodeRow and DecodeDatum would, without resolving uuid-names; ok is
// false for anything they might refuse or that insertText leaves to them.
func (t *txn) rowText(text []byte, ts *TableSchema) (cols []textColumn, ok bool) {
	p := &jsonParser{data: text}
	ok = p.objectMembers(func(key []byte) bool {
		c := ts.byName[string(key)]
		if c == nil || givenIn(cols, c) {
			return false // unknown, _uuid or _version, or twice
		}
		tc := textColumn{c: c}
		if !p.datumText(&tc, &c.Type) {
			return false
		}
		cols = append(cols, tc)
		return true
	})
	return cols, ok
}

// datumText decodes the value of a column of type ct into tc.
func (p *jsonParser) datumText(tc *textColumn, ct *ColumnType) bool {
	p.skipSpace()
	switch tag := p.taggedArray(); {
	case ct.IsMap():
		if tag != "map" {
			return false
		}
		var keys, values []Atom
		if !p.arrayElements(func() bool {
			if !p.consume('[') {
				return false
			}
			k, ok := p.atomText(&ct.Key)
			if !ok || !p.consume(',') {
				return false
			}
			v, ok := p.atomText(ct.Value)
			if !ok || !p.consume(']') {
				return false
			}
			keys, values = append(keys, k), append(values, v)
			return true
		}) || !p.consume(']') || !p.consume(']') || checkCount(nil, ct, len(keys)) != nil {
			return false
		}
		if keys == nil {
			keys, values = []Atom{}, []Atom{}
		}
		if !isSortedUnique(keys) {
			sortPairs(keys, values)
			if !isSortedUnique(keys) {
				return false
			}
		}
		tc.d = Datum{Keys: keys, Values: values}
		return true
	case tag == "set":
		var keys []Atom
		if !p.arrayElements(func() bool {
			if name, ok := p.namedUUID(&ct.Key); ok {
				tc.name = name
				keys = append(keys, Atom{})
				return true
			}
			a, ok := p.atomText(&ct.Key)
			keys = append(keys, a)
			return ok
		}) || !p.consume(']') || !p.consume(']') || checkCount(nil, ct, len(keys)) != nil {
			return false
		}
		if tc.name != "" {
			return len(keys) == 1 // a uuid-name alone; no duplicate to find
		}
		if keys == nil {
			keys = []Atom{}
		}
		d := Set(keys...)
		if len(d.Keys) != len(keys) {
			return false
		}
		tc.d = d
		return true
	case tag != "":
		if name, ok := p.namedUUID(&ct.Key); ok {
			tc.name = name
			return checkCount(nil, ct, 1) == nil
		}
	}
	a, ok := p.atomText(&ct.Key)
	if !ok || checkCount(nil, ct, 1) != nil {
		return false
	}
	tc.d = Scalar(a)
	return true
}

// taggedArray reports the tag of a ["set", [...]] or ["map", [...]] at
// p.pos and moves past `["set",[` (its caller consumes both closing
// brackets); for another array it reports its first
// string without moving ("uuid", "named-uuid"); else "".
func (p *jsonParser) taggedArray() string {
	if p.pos >= len(p.data) || p.data[p.pos] != '[' {
		return ""
	}
	start := p.pos
	p.pos++
	p.skipSpace()
	tag, ok := p.plainString()
	if !ok {
		p.pos = start
		return ""
	}
	switch string(tag) {
	case "set", "map":
		if p.consume(',') && p.consume('[') {
			return string(tag)
		}
	case "uuid":
		p.pos = start
		return "uuid"
	case "named-uuid":
		p.pos = start
		return "named-uuid"
	}
	p.pos = start
	return "?"
}

// namedUUID decodes a ["named-uuid", NAME] at p.pos for a column whose
// key is bt, checking only that NAME is an identifier (resolve's check).
func (p *jsonParser) namedUUID(bt *BaseType) (string, bool) {
	p.skipSpace()
	start := p.pos
	if bt.Type != TypeUUID || bt.Enum != nil || !p.consume('[') {
		p.pos = start
		return "", false
	}
	if tag, ok := p.plainString(); !ok || string(tag) != "named-uuid" || !p.consume(',') {
		p.pos = start
		return "", false
	}
	name, ok := p.plainString()
	if !ok || !isIdentifier(string(name)) || !p.consume(']') {
		p.pos = start
		return "", false
	}
	return string(name), true
}

// atomText decodes an atom of type bt at p.pos and checks its
// constraints: a number, string or boolean, or ["uuid", "..."].
func (p *jsonParser) atomText(bt *BaseType) (Atom, bool) {
	p.skipSpace()
	if bt.Type == TypeUUID {
		if !p.consume('[') {
			return Atom{}, false
		}
		tag, ok := p.plainString()
		if !ok || string(tag) != "uuid" || !p.consume(',') {
			return Atom{}, false
		}
		s, ok := p.plainString()
		if !ok || !p.consume(']') {
			return Atom{}, false
		}
		u, err := ParseUUID(string(s))
		if err != nil {
			return Atom{}, false
		}
		a := UUIDAtom(u)
		return a, bt.Check(a) == nil
	}
	a, ok := p.scalarAtom(bt.Type)
	return a, ok && bt.Check(a) == nil
}

// objectMembers calls member with each key of the object at p.pos and p
// at its value, which member must consume; keys must be plain strings.
func (p *jsonParser) objectMembers(member func(key []byte) bool) bool {
	p.skipSpace()
	if !p.consume('{') {
		return false
	}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return true
	}
	for {
		key, ok := p.plainString()
		if !ok || !p.consume(':') {
			return false
		}
		p.skipSpace()
		if !member(key) {
			return false
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return false
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case '}':
			p.pos++
			return true
		default:
			return false
		}
	}
}

// arrayElements calls element for each element of an array whose opening
// bracket p has passed, up to its closing bracket, which it leaves.
func (p *jsonParser) arrayElements(element func() bool) bool {
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		return true
	}
	for {
		if !element() {
			return false
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return false
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case ']':
			return true
		default:
			return false
		}
	}
}

// plainString returns the bytes of the string at p.pos, after leading
// space, and moves past it, if it has no escape and no control character.
func (p *jsonParser) plainString() ([]byte, bool) {
	p.skipSpace()
	d := p.data
	if p.pos >= len(d) || d[p.pos] != '"' {
		return nil, false
	}
	for i := p.pos + 1; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			s := d[p.pos+1 : i]
			p.pos = i + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// consume moves past c, after leading space, if it is next.
func (p *jsonParser) consume(c byte) bool {
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == c {
		p.pos++
		return true
	}
	return false
}
