package ovsdb

import (
	"encoding/json"
	"fmt"
	"math"
)

// AtomicType is one of the five OVSDB atomic types. The zero value is
// TypeInvalid, the type of the zero Atom.
type AtomicType uint8

// The atomic types, in the order ovsdb-server enumerates them.
const (
	TypeInvalid AtomicType = iota
	TypeInteger
	TypeReal
	TypeBoolean
	TypeString
	TypeUUID
)

var atomicTypeNames = [...]string{"<invalid>", "integer", "real", "boolean", "string", "uuid"}

func (t AtomicType) String() string {
	if int(t) < len(atomicTypeNames) {
		return atomicTypeNames[t]
	}
	return fmt.Sprintf("AtomicType(%d)", uint8(t))
}

// ParseAtomicType returns the type named s ("integer", "real", ...).
func ParseAtomicType(s string) (AtomicType, bool) {
	for i, n := range atomicTypeNames[1:] {
		if n == s {
			return AtomicType(i + 1), true
		}
	}
	return TypeInvalid, false
}

// RefType says whether a reference keeps its target alive (strong) or
// disappears with it (weak).
type RefType uint8

// The reference types.
const (
	RefStrong RefType = iota
	RefWeak
)

func (r RefType) String() string {
	if r == RefWeak {
		return "weak"
	}
	return "strong"
}

// BaseType is the type of the keys or of the values of a column: an atomic
// type plus its constraints.
type BaseType struct {
	Type AtomicType
	// Enum, when not nil, is the set of allowed values.
	Enum *Datum
	// MinInteger and MaxInteger bound integer values (math.MinInt64 and
	// math.MaxInt64 when unconstrained).
	MinInteger, MaxInteger int64
	// MinReal and MaxReal bound real values (±MaxFloat64 when unconstrained).
	MinReal, MaxReal float64
	// MinLength and MaxLength bound string lengths in Unicode code points
	// (0 and math.MaxInt when unconstrained).
	MinLength, MaxLength int
	// RefTable names the table a uuid refers to ("" for a plain uuid), and
	// RefType says how.
	RefTable string
	RefType  RefType
}

// NewBaseType returns an unconstrained BaseType of type t.
func NewBaseType(t AtomicType) BaseType {
	return BaseType{
		Type:       t,
		MinInteger: math.MinInt64, MaxInteger: math.MaxInt64,
		MinReal: -math.MaxFloat64, MaxReal: math.MaxFloat64,
		MaxLength: math.MaxInt,
	}
}

// Unlimited is ColumnType.Max for a column with no upper bound on its size.
const Unlimited = math.MaxInt

// ColumnType is the type of a column: a set of Min to Max keys, or a map
// when Value is not nil.
type ColumnType struct {
	Key   BaseType
	Value *BaseType
	Min   int
	Max   int // Unlimited for "unlimited"
}

// IsMap reports whether t is a map type.
func (t *ColumnType) IsMap() bool { return t.Value != nil }

// IsScalar reports whether t holds exactly one atom (min = max = 1, no map).
func (t *ColumnType) IsScalar() bool { return t.Min == 1 && t.Max == 1 && t.Value == nil }

// IsOptional reports whether t is a set of 0 or 1 atoms.
func (t *ColumnType) IsOptional() bool { return t.Min == 0 && t.Max == 1 && t.Value == nil }

func (t *ColumnType) String() string {
	s := t.Key.Type.String()
	if t.Value != nil {
		s = "map of " + s + " to " + t.Value.Type.String()
	} else if !t.IsScalar() {
		s = "set of " + s
	}
	if !t.IsScalar() {
		max := "unlimited"
		if t.Max != Unlimited {
			max = fmt.Sprint(t.Max)
		}
		s += fmt.Sprintf(" (%d to %s)", t.Min, max)
	}
	return s
}

// IsDefault reports whether d is the default value of t:
// d.Equal(t.Default()) without building the default.
func (t *ColumnType) IsDefault(d Datum) bool {
	if t.Min == 0 {
		return len(d.Keys) == 0 && len(d.Values) == 0
	}
	if len(d.Keys) != 1 || d.Keys[0] != DefaultAtom(t.Key.Type) {
		return false
	}
	if t.Value == nil {
		return len(d.Values) == 0
	}
	return len(d.Values) == 1 && d.Values[0] == DefaultAtom(t.Value.Type)
}

// Default returns the default value of a column of type t: empty when Min is
// 0, otherwise the default atom(s).
func (t *ColumnType) Default() Datum {
	if t.Min == 0 {
		return Datum{}
	}
	d := Datum{Keys: []Atom{DefaultAtom(t.Key.Type)}}
	if t.Value != nil {
		d.Values = []Atom{DefaultAtom(t.Value.Type)}
	}
	return d
}

// parseBaseType parses a <base-type> (ovsdb(7)): an atomic type name or an
// object with "type" and constraints.
func parseBaseType(raw json.RawMessage) (BaseType, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		t, ok := ParseAtomicType(name)
		if !ok {
			return BaseType{}, fmt.Errorf("unknown atomic type %q", name)
		}
		return NewBaseType(t), nil
	}
	var obj struct {
		Type       string          `json:"type"`
		Enum       json.RawMessage `json:"enum"`
		MinInteger *int64          `json:"minInteger"`
		MaxInteger *int64          `json:"maxInteger"`
		MinReal    *float64        `json:"minReal"`
		MaxReal    *float64        `json:"maxReal"`
		MinLength  *int            `json:"minLength"`
		MaxLength  *int            `json:"maxLength"`
		RefTable   *string         `json:"refTable"`
		RefType    *string         `json:"refType"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return BaseType{}, fmt.Errorf("base type %s: %w", raw, err)
	}
	t, ok := ParseAtomicType(obj.Type)
	if !ok {
		return BaseType{}, fmt.Errorf("unknown atomic type %q", obj.Type)
	}
	b := NewBaseType(t)
	if obj.Enum != nil {
		v, err := decodeGeneric(obj.Enum)
		if err != nil {
			return BaseType{}, fmt.Errorf("enum: %w", err)
		}
		et := ColumnType{Key: NewBaseType(t), Min: 1, Max: Unlimited}
		d, err := DecodeDatum(v, &et, nil)
		if err != nil {
			return BaseType{}, fmt.Errorf("enum: %w", err)
		}
		b.Enum = &d
	}
	bounds := func(name string, ok bool) error {
		if !ok {
			return fmt.Errorf("%s does not apply to type %s", name, t)
		}
		return nil
	}
	if obj.MinInteger != nil || obj.MaxInteger != nil {
		if err := bounds("minInteger/maxInteger", t == TypeInteger); err != nil {
			return b, err
		}
		if obj.MinInteger != nil {
			b.MinInteger = *obj.MinInteger
		}
		if obj.MaxInteger != nil {
			b.MaxInteger = *obj.MaxInteger
		}
		if b.MinInteger > b.MaxInteger {
			return b, fmt.Errorf("minInteger %d exceeds maxInteger %d", b.MinInteger, b.MaxInteger)
		}
	}
	if obj.MinReal != nil || obj.MaxReal != nil {
		if err := bounds("minReal/maxReal", t == TypeReal); err != nil {
			return b, err
		}
		if obj.MinReal != nil {
			b.MinReal = *obj.MinReal
		}
		if obj.MaxReal != nil {
			b.MaxReal = *obj.MaxReal
		}
		if b.MinReal > b.MaxReal {
			return b, fmt.Errorf("minReal %g exceeds maxReal %g", b.MinReal, b.MaxReal)
		}
	}
	if obj.MinLength != nil || obj.MaxLength != nil {
		if err := bounds("minLength/maxLength", t == TypeString); err != nil {
			return b, err
		}
		if obj.MinLength != nil {
			b.MinLength = *obj.MinLength
		}
		if obj.MaxLength != nil {
			b.MaxLength = *obj.MaxLength
		}
		if b.MinLength < 0 || b.MinLength > b.MaxLength {
			return b, fmt.Errorf("bad string length bounds %d..%d", b.MinLength, b.MaxLength)
		}
	}
	if obj.RefTable != nil {
		if err := bounds("refTable", t == TypeUUID); err != nil {
			return b, err
		}
		b.RefTable = *obj.RefTable
	}
	if obj.RefType != nil {
		if err := bounds("refType", t == TypeUUID); err != nil {
			return b, err
		}
		switch *obj.RefType {
		case "strong":
			b.RefType = RefStrong
		case "weak":
			b.RefType = RefWeak
		default:
			return b, fmt.Errorf("refType must be \"strong\" or \"weak\", not %q", *obj.RefType)
		}
	}
	return b, nil
}

// parseColumnType parses a <type>: an atomic type name, or an object with
// "key", optional "value", "min" and "max".
func parseColumnType(raw json.RawMessage) (ColumnType, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		k, err := parseBaseType(raw)
		if err != nil {
			return ColumnType{}, err
		}
		return ColumnType{Key: k, Min: 1, Max: 1}, nil
	}
	var obj struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
		Min   *int            `json:"min"`
		Max   json.RawMessage `json:"max"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return ColumnType{}, fmt.Errorf("type %s: %w", raw, err)
	}
	if obj.Key == nil {
		return ColumnType{}, fmt.Errorf("type %s has no key", raw)
	}
	k, err := parseBaseType(obj.Key)
	if err != nil {
		return ColumnType{}, fmt.Errorf("key: %w", err)
	}
	t := ColumnType{Key: k, Min: 1, Max: 1}
	if obj.Value != nil {
		v, err := parseBaseType(obj.Value)
		if err != nil {
			return ColumnType{}, fmt.Errorf("value: %w", err)
		}
		t.Value = &v
	}
	if obj.Min != nil {
		t.Min = *obj.Min
	}
	if obj.Max != nil {
		var s string
		var n int
		if err := json.Unmarshal(obj.Max, &s); err == nil {
			if s != "unlimited" {
				return ColumnType{}, fmt.Errorf("max must be a positive integer or \"unlimited\", not %q", s)
			}
			t.Max = Unlimited
		} else if err := json.Unmarshal(obj.Max, &n); err == nil {
			t.Max = n
		} else {
			return ColumnType{}, fmt.Errorf("bad max %s", obj.Max)
		}
	}
	if t.Min < 0 || t.Min > 1 {
		return ColumnType{}, fmt.Errorf("min must be 0 or 1, not %d", t.Min)
	}
	if t.Max < 1 || t.Max < t.Min {
		return ColumnType{}, fmt.Errorf("max %d must be at least 1 and at least min %d", t.Max, t.Min)
	}
	return t, nil
}
