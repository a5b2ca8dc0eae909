package ovsdb

import "fmt"

// Function is a <function> of a condition (RFC 7047 §5.1).
type Function uint8

// The condition functions.
const (
	FuncEqual Function = iota
	FuncNotEqual
	FuncLess
	FuncLessEqual
	FuncGreater
	FuncGreaterEqual
	FuncIncludes
	FuncExcludes
	// FuncTrue and FuncFalse are the boolean conditions monitor_cond allows.
	FuncTrue
	FuncFalse
)

var functionNames = map[string]Function{
	"==": FuncEqual, "!=": FuncNotEqual, "<": FuncLess, "<=": FuncLessEqual,
	">": FuncGreater, ">=": FuncGreaterEqual, "includes": FuncIncludes, "excludes": FuncExcludes,
}

// Condition is one parsed <condition>: Column Function Arg, or a constant
// true/false.
type Condition struct {
	Column   *ColumnSchema
	Function Function
	Arg      Datum
}

// unconstrained returns bt without its value constraints (it keeps the
// reference table so named-uuid lookups still make sense).
func (bt *BaseType) unconstrained() BaseType {
	u := NewBaseType(bt.Type)
	u.RefTable, u.RefType = bt.RefTable, bt.RefType
	return u
}

// ParseCondition parses a condition for table t: [column, function, value]
// or a JSON boolean.
func ParseCondition(v any, t *TableSchema, names NameResolver) (Condition, error) {
	if b, ok := v.(bool); ok {
		if b {
			return Condition{Function: FuncTrue}, nil
		}
		return Condition{Function: FuncFalse}, nil
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return Condition{}, syntaxErr(v, "Parse error in condition.")
	}
	name, ok1 := arr[0].(string)
	fname, ok2 := arr[1].(string)
	if !ok1 || !ok2 {
		return Condition{}, syntaxErr(v, "Parse error in condition.")
	}
	c := t.Column(name)
	if c == nil {
		return Condition{}, &Error{Tag: ErrUnknownColumn, Details: fmt.Sprintf("No column %s in table %s.", name, t.Name), Syntax: syntaxText(v)}
	}
	fn, ok := functionNames[fname]
	if !ok {
		return Condition{}, Errorf("unknown function", "No function named %s.", fname)
	}
	cond := Condition{Column: c, Function: fn}
	// The argument has the column's type, constraints included, as in
	// ovsdb-server; on a set or map, "includes" takes from none to the
	// column's most elements, "excludes" any number.
	ct := c.Type
	switch fn {
	case FuncLess, FuncLessEqual, FuncGreater, FuncGreaterEqual:
		kt := c.Type.Key.Type
		if c.Type.IsMap() || c.Type.Max != 1 || (kt != TypeInteger && kt != TypeReal) {
			return Condition{}, syntaxErr(v, "Type mismatch: \"%s\" operator may not be applied to column %s of type %s.", fname, name, c.Type.typeEnglish())
		}
	case FuncIncludes:
		if !c.Type.IsScalar() {
			ct.Min = 0
		}
	case FuncExcludes:
		if !c.Type.IsScalar() {
			ct.Min, ct.Max = 0, Unlimited
		}
	}
	d, err := DecodeDatum(arr[2], &ct, names)
	if err != nil {
		return Condition{}, err
	}
	cond.Arg = d
	return cond, nil
}

// ParseConditions parses a "where" array.
func ParseConditions(v any, t *TableSchema, names NameResolver) ([]Condition, error) {
	if v == nil {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, syntaxErr(v, "Parse error in condition.")
	}
	conds := make([]Condition, 0, len(arr))
	for _, e := range arr {
		c, err := ParseCondition(e, t, names)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return conds, nil
}

// Eval reports whether row r satisfies the condition.
func (c *Condition) Eval(r *Row) bool {
	switch c.Function {
	case FuncTrue:
		return true
	case FuncFalse:
		return false
	}
	d := r.Get(c.Column)
	switch c.Function {
	case FuncEqual:
		return d.Equal(c.Arg)
	case FuncNotEqual:
		return !d.Equal(c.Arg)
	case FuncIncludes:
		return d.Includes(c.Arg)
	case FuncExcludes:
		for i, k := range c.Arg.Keys {
			j, ok := d.Find(k)
			if ok && (c.Arg.Values == nil || d.Values == nil || d.Values[j] == c.Arg.Values[i]) {
				return false
			}
		}
		return true
	}
	if d.Len() != 1 || c.Arg.Len() != 1 {
		return false
	}
	cmp := d.Keys[0].Compare(c.Arg.Keys[0])
	switch c.Function {
	case FuncLess:
		return cmp < 0
	case FuncLessEqual:
		return cmp <= 0
	case FuncGreater:
		return cmp > 0
	case FuncGreaterEqual:
		return cmp >= 0
	}
	return false
}

// MatchAll reports whether r satisfies every condition (a conjunction, as in
// a transaction's "where").
func MatchAll(conds []Condition, r *Row) bool {
	for i := range conds {
		if !conds[i].Eval(r) {
			return false
		}
	}
	return true
}

// MatchAny reports whether r satisfies at least one condition (a
// disjunction, as in monitor_cond's "where"); an empty list matches all.
func MatchAny(conds []Condition, r *Row) bool {
	if len(conds) == 0 {
		return true
	}
	for i := range conds {
		if conds[i].Eval(r) {
			return true
		}
	}
	return false
}

// MarshalJSON renders the condition back into RFC 7047 form.
func (c Condition) MarshalJSON() ([]byte, error) {
	switch c.Function {
	case FuncTrue:
		return []byte("true"), nil
	case FuncFalse:
		return []byte("false"), nil
	}
	var fname string
	for n, f := range functionNames {
		if f == c.Function {
			fname = n
		}
	}
	b := []byte{'['}
	b = AppendJSONString(b, c.Column.Name)
	b = append(b, ',')
	b = AppendJSONString(b, fname)
	b = append(b, ',')
	ct := c.Column.Type
	ct.Min, ct.Max = 0, Unlimited
	b = c.Arg.AppendJSON(b, &ct)
	b = append(b, ']')
	return b, nil
}
