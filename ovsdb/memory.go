package ovsdb

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// How much memory one request may cost.
//
// A JSON-RPC message may be as long as 1 GiB. Decoded naively, a message
// made of tiny values ("0,0,0,...", "[],[],...", "{},{},...") costs 20 to
// 50 bytes of heap per byte of JSON: each value is boxed in an interface,
// each array element is a 16-byte slot, each object a hash map, each set
// element a 40-byte Atom. One such request would take gigabytes and get the
// whole database server killed, losing every client. Three rules keep the
// cost of decoding a request within a small multiple of its size:
//
//   - Bulk data, the elements of a large set or map, never goes through the
//     generic tree: DecodeJSON keeps the array inside a large ["set", [...]]
//     or ["map", [...]] as text (a *rawArray), and DecodeDatum decodes it
//     straight into atoms. Before it allocates them it checks that they take
//     at most atomBytesPerByte times the array's text (or atomBytesFloor).
//     Distinct elements need distinct text, so a valid set is seldom that
//     dense: this refuses inputs such as a set of a million "0"s, which
//     would fail on duplicates anyway, before paying for them. (The densest
//     valid data it refuses: a map of more than 13000 small integers to
//     one-digit integers.)
//   - In a value of rawOperationsMin bytes or more, the operations of a
//     transaction (objects in the top-level array with an "op" member that
//     names one) stay text (a *rawObject) until Database.Transact executes
//     them: only one operation's tree exists at a time, and each is bounded
//     by its own size as below.
//   - The rest of the tree is charged, as DecodeJSON builds it, with an
//     estimate of the heap it takes, and refused with a *TooComplexError once
//     that is over maxTreeBytes(len(data)). Real requests (transactions,
//     monitor conditions) cost 3 to 6 bytes per byte
//     (TestDecodeJSONRealRequestsFit).

const (
	// Estimated heap bytes of the parts of a generic tree (64-bit).
	boxBytes       = 16 // a string or json.Number boxed in an interface
	ifaceBytes     = 16 // an element of a []any
	sliceBoxBytes  = 24 // a []any boxed in an interface
	mapBytes       = 64 // an empty map[string]any
	mapGroupBytes  = 288
	mapEntryBytes  = 96 // a member of a map[string]any beyond the first group, growth included
	rawArrayBytes  = 32 // a rawArray
	rawObjectBytes = 24 // a rawObject
	atomBytes      = 40 // an Atom (TestAtomSize keeps this true)

	// treeBytesPerByte and treeBytesFloor bound the generic tree of a JSON
	// value: see maxTreeBytes.
	treeBytesPerByte = 7
	treeBytesFloor   = 1 << 20

	// atomBytesPerByte and atomBytesFloor bound the atoms of one set or map
	// decoded from text.
	atomBytesPerByte = 8
	atomBytesFloor   = 1 << 20

	// rawArrayMin is the length from which the array of a set or map datum
	// stays text in DecodeJSON's tree. Smaller ones are decoded as usual,
	// which for a handful of elements is as cheap.
	rawArrayMin = 4096
	// rawOperationsMin is the size of JSON value from which DecodeJSON
	// keeps a transaction's operations as text: below it, their trees fit
	// in treeBytesFloor anyway, and decoding them at once is cheaper.
	rawOperationsMin = 64 << 10
	// rawArrayMaxDepth is the deepest nesting at which DecodeJSON looks for
	// datums; real requests have them at depth 8 at most (a monitor
	// condition's set). The bound keeps nested look-alikes from being
	// scanned once per level.
	rawArrayMaxDepth = 8
)

// maxTreeBytes returns the most memory DecodeJSON spends on the tree of a
// value of size bytes.
func maxTreeBytes(size int) int {
	if size > (math.MaxInt-treeBytesFloor)/treeBytesPerByte {
		return math.MaxInt
	}
	return treeBytesPerByte*size + treeBytesFloor
}

func roundUp8(n int) int { return (n + 7) &^ 7 }

// TooComplexError is DecodeJSON's error for a value whose decoded form
// would take more memory than is allowed for its size.
type TooComplexError struct {
	Size  int // bytes of JSON
	Limit int // bytes of memory allowed for it
}

func (e *TooComplexError) Error() string {
	return fmt.Sprintf("JSON value of %d bytes is too complex: decoding it would take more than %d bytes of memory, the limit of %d bytes per byte plus %d",
		e.Size, e.Limit, treeBytesPerByte, treeBytesFloor)
}

// rawArray is the undecoded text of the array of a large set or map datum,
// as DecodeJSON leaves it for DecodeDatum. The text has been checked to be
// a valid JSON array of n elements.
type rawArray struct {
	text []byte
	n    int
}

// MarshalJSON returns the array's text.
func (r *rawArray) MarshalJSON() ([]byte, error) { return r.text, nil }

// rawObject is the undecoded text of a transaction's operation, as
// DecodeJSON leaves it for Database.Transact. The text has been checked to
// be a valid JSON object.
type rawObject struct {
	text []byte
}

// MarshalJSON returns the object's text.
func (r *rawObject) MarshalJSON() ([]byte, error) { return r.text, nil }

// decode returns the operation's generic form. The memory it may take is
// bounded by the operation's own size, and only one operation of a
// transaction is decoded at a time.
func (r *rawObject) decode() (any, error) {
	v, err := parseJSON(r.text)
	var tc *TooComplexError
	if errors.As(err, &tc) {
		return nil, Errorf(ErrResourcesExhausted, "operation %s: %v", abbrevJSON(r), err)
	}
	if err != nil {
		return nil, Errorf(ErrSyntax, "operation: %v", err)
	}
	return v, nil
}

// parser returns a parser positioned after the array's opening bracket.
func (r *rawArray) parser() *jsonParser {
	return &jsonParser{data: r.text, pos: 1, budget: math.MaxInt}
}

// checkBudget refuses an array whose atoms would take more memory than
// its text allows.
func (r *rawArray) checkBudget(kind string, atomsPerElem int) error {
	need := r.n * atomsPerElem * atomBytes
	limit := max(atomBytesPerByte*len(r.text), atomBytesFloor)
	if need > limit {
		return Errorf(ErrResourcesExhausted, "%s of %d elements in %d bytes of JSON would take %d bytes of memory, over the limit of %d (%d bytes per byte of JSON, at least %d): elements that small must repeat",
			kind, r.n, len(r.text), need, limit, atomBytesPerByte, atomBytesFloor)
	}
	return nil
}

// decodeSet decodes the array's elements as atoms of type bt.
func (r *rawArray) decodeSet(bt *BaseType, names NameResolver) ([]Atom, error) {
	if err := r.checkBudget("set", 1); err != nil {
		return nil, err
	}
	p := r.parser()
	keys := make([]Atom, r.n)
	for i := range keys {
		if i > 0 {
			p.skipSpace()
			p.pos++ // the comma
		}
		var err error
		if keys[i], err = p.atom(bt, names); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// decodeMap decodes the array's elements as [key, value] pairs of type ct.
func (r *rawArray) decodeMap(ct *ColumnType, names NameResolver) (keys, values []Atom, err error) {
	if err := r.checkBudget("map", 2); err != nil {
		return nil, nil, err
	}
	p := r.parser()
	keys = make([]Atom, r.n)
	values = make([]Atom, r.n)
	for i := range keys {
		if i > 0 {
			p.skipSpace()
			p.pos++ // the comma
		}
		if keys[i], values[i], err = p.pair(ct, names); err != nil {
			return nil, nil, err
		}
	}
	return keys, values, nil
}

// pair decodes a map's [key, value] at p.pos.
func (p *jsonParser) pair(ct *ColumnType, names NameResolver) (k, v Atom, err error) {
	p.skipSpace()
	start, depth := p.pos, p.depth
	if n, err := p.skipValue(); err != nil || n != 2 || p.data[start] != '[' {
		p.pos, p.depth = start, depth
		e, err := p.value()
		if err != nil {
			return Atom{}, Atom{}, err
		}
		return Atom{}, Atom{}, syntaxErr(e, "expected 2-element array")
	}
	p.pos = start + 1
	if k, err = p.atom(&ct.Key, names); err != nil {
		return Atom{}, Atom{}, err
	}
	p.skipSpace()
	p.pos++ // the comma
	if v, err = p.atom(ct.Value, names); err != nil {
		return Atom{}, Atom{}, err
	}
	p.skipSpace()
	p.pos++ // the closing bracket
	return k, v, nil
}

// atom decodes the atom at p.pos as DecodeAtom decodes its generic form:
// numbers, strings and booleans directly, anything else through the
// generic form.
func (p *jsonParser) atom(bt *BaseType, names NameResolver) (Atom, error) {
	p.skipSpace()
	start := p.pos
	a, ok := p.scalarAtom(bt.Type)
	if !ok {
		p.pos = start
		v, err := p.value()
		if err != nil {
			return Atom{}, err
		}
		return DecodeAtom(v, bt, names)
	}
	if err := bt.Check(a); err != nil {
		return Atom{}, err
	}
	return a, nil
}

// scalarAtom decodes the number, string or boolean at p.pos as an atom of
// type t; ok is false when it is anything else or does not fit t.
func (p *jsonParser) scalarAtom(t AtomicType) (a Atom, ok bool) {
	if p.pos >= len(p.data) {
		return Atom{}, false
	}
	switch c := p.data[p.pos]; {
	case c == '"' && t == TypeString:
		s, err := p.str()
		return String(s), err == nil
	case c == '-' || ('0' <= c && c <= '9'):
		b, err := p.numberText()
		if err != nil {
			return Atom{}, false
		}
		switch t {
		case TypeInteger:
			i, err := strconv.ParseInt(string(b), 10, 64)
			return Integer(i), err == nil
		case TypeReal:
			f, err := strconv.ParseFloat(string(b), 64)
			return Real(f), err == nil && !math.IsInf(f, 0)
		}
	case c == 't' && t == TypeBoolean:
		return Boolean(true), p.literal("true") == nil
	case c == 'f' && t == TypeBoolean:
		return Boolean(false), p.literal("false") == nil
	}
	return Atom{}, false
}

// sortPairs sorts a map's keys, and its values along, in place.
func sortPairs(keys, values []Atom) { sort.Sort(pairsByKey{keys, values}) }

type pairsByKey struct{ keys, values []Atom }

func (s pairsByKey) Len() int           { return len(s.keys) }
func (s pairsByKey) Less(i, j int) bool { return s.keys[i].Compare(s.keys[j]) < 0 }
func (s pairsByKey) Swap(i, j int) {
	s.keys[i], s.keys[j] = s.keys[j], s.keys[i]
	s.values[i], s.values[j] = s.values[j], s.values[i]
}
