package flow

import (
	"fmt"
	"strings"
)

// Learn adds a rule to Table when it runs, or refreshes the rule if it is
// already there (OpenFlow's learn). The rule's match and actions come from
// Specs; a spec whose source is a packet field makes the megaflow match
// that field, since the learned rule depends on it. The rule is removed
// after IdleTimeout seconds without a packet running this Learn, or
// HardTimeout seconds after it was learned (0: never).
type Learn struct {
	Table       uint8
	Priority    uint16
	IdleTimeout uint16
	HardTimeout uint16
	Cookie      uint64
	Specs       []LearnSpec
}

// LearnSpec is one part of a learned rule: with Match, the rule matches
// Dst against the value; otherwise the rule loads the value into Dst. The
// value is Src's bits when the Learn runs, or Value if Src is not set
// (Src.Field == 0); Value is in Dst's own bit space, as Load's.
type LearnSpec struct {
	Match bool
	Dst   FieldRange
	Src   FieldRange
	Value U128
}

func (Learn) isAction() {}

// String formats the action as learn(table=T,priority=P,...,match:SRC->DST,
// load:SRC->DST), SRC being a field range or a value.
func (a Learn) String() string {
	p := []string{fmt.Sprintf("table=%d", a.Table), fmt.Sprintf("priority=%d", a.Priority)}
	if a.IdleTimeout != 0 {
		p = append(p, fmt.Sprintf("idle_timeout=%d", a.IdleTimeout))
	}
	if a.HardTimeout != 0 {
		p = append(p, fmt.Sprintf("hard_timeout=%d", a.HardTimeout))
	}
	if a.Cookie != 0 {
		p = append(p, fmt.Sprintf("cookie=0x%x", a.Cookie))
	}
	for _, s := range a.Specs {
		p = append(p, s.String())
	}
	return "learn(" + strings.Join(p, ",") + ")"
}

func (s LearnSpec) String() string {
	kind := "load:"
	if s.Match {
		kind = "match:"
	}
	if s.Src.Field.Valid() {
		return fmt.Sprintf("%s%s->%s", kind, s.Src, s.Dst)
	}
	l := Load{Dst: s.Dst, Value: s.Value}.String()
	return kind + strings.TrimPrefix(strings.TrimPrefix(l, "load:"), "set_field:")
}

func parseLearn(args string) (Action, error) {
	var a Learn
	for _, p := range splitTop(args) {
		key, val, _ := strings.Cut(p, "=")
		var n uint64
		var err error
		switch key {
		case "table":
			n, err = parseUint(val, 8)
			a.Table = uint8(n)
		case "priority":
			n, err = parseUint(val, 16)
			a.Priority = uint16(n)
		case "idle_timeout":
			n, err = parseUint(val, 16)
			a.IdleTimeout = uint16(n)
		case "hard_timeout":
			n, err = parseUint(val, 16)
			a.HardTimeout = uint16(n)
		case "cookie":
			a.Cookie, err = parseUint(val, 64)
		default:
			s, err := parseLearnSpec(p)
			if err != nil {
				return nil, fmt.Errorf("learn: %q: %w", p, err)
			}
			a.Specs = append(a.Specs, s)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("learn: %s: %w", key, err)
		}
	}
	return a, nil
}

func parseLearnSpec(p string) (LearnSpec, error) {
	var s LearnSpec
	rest, ok := strings.CutPrefix(p, "match:")
	if ok {
		s.Match = true
	} else if rest, ok = strings.CutPrefix(p, "load:"); !ok {
		return s, fmt.Errorf("expected match:SRC->DST or load:SRC->DST")
	}
	src, dst, ok := strings.Cut(rest, "->")
	if !ok {
		return s, fmt.Errorf("missing ->")
	}
	if r, err := ParseFieldRange(src); err == nil {
		d, err := ParseFieldRange(dst)
		s.Src, s.Dst = r, d
		return s, err
	}
	// A value, written as set_field's (an address as an address).
	l, err := parseAction("set_field:" + rest)
	if err != nil {
		return s, err
	}
	s.Dst, s.Value = l.(Load).Dst, l.(Load).Value
	return s, nil
}

func validateLearn(table uint8, a Learn) error {
	if a.Table >= NumTables {
		return fmt.Errorf("learn: table %d out of range", a.Table)
	}
	for i, s := range a.Specs {
		err := s.Dst.Validate()
		if err == nil && s.Src.Field.Valid() {
			if err = s.Src.Validate(); err == nil && s.Src.Width() != s.Dst.Width() {
				err = fmt.Errorf("widths differ")
			}
		}
		if err == nil && !s.Src.Field.Valid() && !s.Value.AndNot(OnesU128(s.Dst.Width())).IsZero() {
			err = fmt.Errorf("value does not fit %s", s.Dst)
		}
		if err == nil && !s.Match {
			err = writable(s.Dst, false)
		}
		if err != nil {
			return fmt.Errorf("learn spec %d (%s): %w", i, s, err)
		}
	}
	return nil
}

// Rule returns the rule the Learn installs, given the value of each spec
// (in its Dst's bit space).
func (a Learn) Rule(values []U128) Rule {
	r := Rule{Table: a.Table, Priority: a.Priority, Cookie: a.Cookie}
	for i, s := range a.Specs {
		v := values[i]
		if s.Match {
			r.Match.SetRange(s.Dst, v)
			continue
		}
		r.Actions = append(r.Actions, Load{Dst: s.Dst, Value: v})
	}
	return r
}
