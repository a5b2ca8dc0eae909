package lflow

// astArena holds the syntax tree nodes that Compile parses. The tree of one
// logical flow is dead once its rules are emitted, so a Result reused
// across calls hands the same memory to the next flow instead of leaving
// a dozen small objects per flow to the garbage collector. Parsers without
// an arena (ParseExpr, ParseActions) allocate as usual: their trees belong
// to the caller.
type astArena struct {
	cmps    slab[CmpExpr]
	ands    slab[AndExpr]
	ors     slab[OrExpr]
	exprs   slab[Expr] // the terms of AndExpr and OrExpr
	assigns slab[AssignAction]
	refs    slab[FieldRef]
	nexts   slab[NextAction]
}

// reset makes all the arena's memory free for reuse. Nothing handed out
// before may be used afterwards.
func (a *astArena) reset() {
	a.cmps.reset()
	a.ands.reset()
	a.ors.reset()
	a.exprs.reset()
	a.assigns.reset()
	a.refs.reset()
	a.nexts.reset()
}

// slab hands out zeroed values of T from chunks. A full chunk is replaced,
// never grown, so values handed out stay where they are.
type slab[T any] struct {
	buf []T
}

func (s *slab[T]) new() *T {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]T, 0, max(16, 2*cap(s.buf)))
	}
	s.buf = s.buf[:len(s.buf)+1]
	p := &s.buf[len(s.buf)-1]
	var zero T
	*p = zero
	return p
}

// slice returns a copy of src in the slab, with no room to append in place
// (an append reallocates rather than overwrite a neighbour).
func (s *slab[T]) slice(src []T) []T {
	n := len(src)
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]T, 0, max(16, 2*cap(s.buf), n))
	}
	l := len(s.buf)
	s.buf = s.buf[:l+n]
	out := s.buf[l : l+n : l+n]
	copy(out, src)
	return out
}

func (s *slab[T]) reset() { s.buf = s.buf[:0] }
