// Package lflow implements OVN's logical flow language, the text in the
// match and actions columns of the Southbound Logical_Flow table
// (ovn-sb(5)).
//
// The pipeline a flow goes through:
//
//	text ──Lexer──▶ tokens ──ParseExpr/ParseActions──▶ AST
//	AST ──Normalize──▶ disjunction of conjunctions of per-field clauses
//	(normal form, actions) ──Compile──▶ datapath flows (tables, masked
//	matches over OpenFlow-style fields, action programs)
//
// Symtab holds every field, subfield and predicate of the language, with
// its width, prerequisites and the datapath field it lives in. It is
// immutable after NewSymtab and shared by all callers.
//
// Normalization works as OVN's does: negation is pushed down to the
// comparisons, predicates are expanded, each comparison is annotated with
// its symbol's prerequisites, and the result is put in disjunctive normal
// form. Each conjunction keeps at most one clause per field, and a clause is
// a small disjunction of masked values of that one field (a set, a range
// turned into prefixes, or the bits of a !=). Keeping a clause's
// alternatives together is what lets the compiler use conjunctive matches
// (OpenFlow's conjunction(id, k/n)): 1,000 addresses against 10 ports cost
// 1,010 flows plus one, not 10,000.
//
// Address sets, port groups, logical port keys and chassis residency come
// from the caller through the Env interface; the package keeps no global
// state.
package lflow
